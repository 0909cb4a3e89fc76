package producer

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/producer/source"
)

// Node is this producer's node among those of trials that span several
// (--node K/N): it makes only what its node's consumers read, each
// consumer's share of its data (batchstore.Node), cut along the node
// order. The zero value is one node.
type Node struct{ Index, Count int }

// ErrNodeSkip: a sample was skipped on a node of several. Every node
// must deal the same count an epoch, or the ranks of the others would
// wait for a step this node's cannot take (DDP hangs): the run fails
// instead, loudly, naming the sample.
var ErrNodeSkip = errors.New("a sample skipped on one node of several: its ranks would take fewer steps than the other nodes' (remove or repair the sample; every node must read the same data)")

// Validate checks a node's numbers; the zero value is one node.
func (n Node) Validate() error {
	if n != (Node{}) && (n.Count < 1 || n.Index < 0 || n.Index >= n.Count) {
		return fmt.Errorf("node %d/%d: want K/N with 0 ≤ K < N", n.Index, n.Count)
	}
	return nil
}

// nodeOrderStream seeds the node order apart from every epoch's.
const nodeOrderStream = 0x6e6f646573

// NodeOrder is the node order of src under seed, the same on every node
// that opens the same source: its pieces (a shard's piece or row group;
// each sample of a folder its own) in a seeded order, each piece's
// samples in dataset order. Kept whole, a piece is read by one node (or
// two, where a run's end falls in it).
func NodeOrder(src source.Source, seed uint64) []int {
	n := src.Len()
	sh, ok := source.As[source.Sharded](src)
	if !ok {
		return rand.New(rand.NewPCG(seed, nodeOrderStream)).Perm(n)
	}
	pieces := make([][]int, sh.Pieces())
	for i := range n {
		p := sh.Piece(i)
		pieces[p] = append(pieces[p], i)
	}
	order := make([]int, 0, n)
	for _, p := range rand.New(rand.NewPCG(seed, nodeOrderStream)).Perm(len(pieces)) {
		order = append(order, pieces[p]...)
	}
	return order
}

// NodeFingerprint names what the nodes must agree on to cut the same
// runs: the node count, the seed, and the dataset as the node order sees
// it (its size, class names, each sample's label, in the node order). Two
// nodes that print different ones serve no common epoch.
func NodeFingerprint(src source.Source, seed uint64, count int, order []int) string {
	h := sha256.New()
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	put(uint64(count))
	put(seed)
	put(uint64(len(order)))
	for _, c := range src.Classes() {
		put(uint64(len(c)))
		h.Write([]byte(c))
	}
	for _, i := range order {
		put(uint64(i))
		put(uint64(src.Label(i)))
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:8])
}

// storeNode is the store's view of cfg's node.
func storeNode(cfg Config) batchstore.Node {
	if cfg.Node.Count <= 1 {
		return batchstore.Node{}
	}
	return batchstore.Node{Index: cfg.Node.Index, Count: cfg.Node.Count, Order: NodeOrder(cfg.Source, cfg.Seed)}
}
