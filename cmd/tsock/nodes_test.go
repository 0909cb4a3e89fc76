package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/fs/fusetest"
	"github.com/tsock/tsock/producer/producertest"
)

// mkNodeGroup makes consumers/name on node k of nodes a group of world
// ranks of batch size per, and claims this node's ranks, k·world/nodes
// to (k+1)·world/nodes-1; it returns their names.
func mkNodeGroup(t *testing.T, d *mountProc, name string, world, per, k, nodes int, dropLast bool) []string {
	t.Helper()
	dir := filepath.Join(d.dir, "consumers", name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	drop := map[bool]string{false: "0\n", true: "1\n"}[dropLast]
	for _, f := range []struct{ file, value string }{{"world", fmt.Sprintf("%d\n", world)}, {"batch_size", fmt.Sprintf("%d\n", per)}, {"drop_last", drop}} {
		if err := os.WriteFile(filepath.Join(dir, f.file), []byte(f.value), 0o644); err != nil {
			t.Fatalf("%s: %v", f.file, err)
		}
	}
	var names []string
	for r := k * world / nodes; r < (k+1)*world/nodes; r++ {
		if err := os.Mkdir(filepath.Join(dir, fmt.Sprint(r)), 0o755); err != nil {
			t.Fatalf("claim rank %d on node %d: %v", r, k, err)
		}
		names = append(names, fmt.Sprintf("%s/%d", name, r))
	}
	return names
}

// nodeStatus is what status.json says of a mount's node.
type nodeStatus struct {
	Node *struct {
		Index       int    `json:"index"`
		Count       int    `json:"count"`
		Fingerprint string `json:"fingerprint"`
	} `json:"node"`
}

// Two daemons as two nodes (--node 0/2 and 1/2, one source, one seed)
// serve one 4-rank trial, 2 ranks each, beside a consumer of its own on
// each node: every epoch, across both nodes, the padded group deals
// every sample at least once and DistributedSampler's count (W·⌈T/W⌉),
// the drop_last group none twice and W·⌊T/W⌋, every rank of both nodes
// the same steps; the plain consumers (one rank a node) read every
// sample once between them, each node about half. Ranks and worlds a
// node cannot serve are refused, naming the node's ranks.
func TestTwoNodesServeOneTrial(t *testing.T) {
	fusetest.Need(t)
	t.Parallel() // see parallelTests
	const n, epochs, world, per, nodes = 103, 2, 4, 3, 2
	args := []string{"--source", fmt.Sprintf("synthetic:%d", n), "--image-size", "8", "--batch-size", "4", "--epochs", fmt.Sprint(epochs), "--seed", "7"}
	var mounts [nodes]*mountProc
	for k := range nodes {
		mounts[k] = startDaemon(t, append(args, "--node", fmt.Sprintf("%d/%d", k, nodes))...)
	}
	var fingerprints []string
	for k, d := range mounts {
		var st nodeStatus
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(d.dir, "status.json"))), &st); err != nil {
			t.Fatal(err)
		}
		if st.Node == nil || st.Node.Index != k || st.Node.Count != nodes || st.Node.Fingerprint == "" {
			t.Fatalf("node %d's status.json: %+v", k, st.Node)
		}
		fingerprints = append(fingerprints, st.Node.Fingerprint)
		if text := readFile(t, filepath.Join(d.dir, "status")); !strings.Contains(text, fmt.Sprintf("node: %d of %d", k, nodes)) {
			t.Fatalf("node %d's status does not say so:\n%s", k, text)
		}
	}
	if fingerprints[0] != fingerprints[1] {
		t.Fatalf("the nodes' fingerprints differ on one source and seed: %v", fingerprints)
	}

	// Refused on node 0 of 2, nothing changed: a rank of node 1, a world
	// the nodes cannot split evenly.
	bad := filepath.Join(mounts[0].dir, "consumers", "bad")
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "world"), []byte("3\n"), 0o644); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("world 3 over 2 nodes: %v, want EINVAL", err)
	}
	if err := os.WriteFile(filepath.Join(bad, "world"), []byte("4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(bad, "2"), 0o755); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("rank 2 of 4 on node 0 of 2: %v, want EINVAL", err)
	}
	if err := os.Remove(bad); err != nil {
		t.Fatal(err)
	}

	type reader struct {
		node int
		name string
	}
	var readers []reader
	for k, d := range mounts {
		for _, g := range []struct {
			name string
			drop bool
		}{{"pad", false}, {"drop", true}} {
			for _, name := range mkNodeGroup(t, d, g.name, world, per, k, nodes, g.drop) {
				readers = append(readers, reader{k, name})
			}
		}
		if err := os.Mkdir(filepath.Join(d.dir, "consumers", "own"), 0o755); err != nil {
			t.Fatal(err)
		}
		readers = append(readers, reader{k, "own"})
	}
	got := make([]map[int][]int, len(readers))
	batches := make([]map[int][]uint64, len(readers))
	errs := make([]error, len(readers))
	var wg sync.WaitGroup
	for i, r := range readers {
		wg.Go(func() {
			runtime.LockOSThread() // a lookup and its open from one thread
			got[i], batches[i], errs[i] = readAllBatches(mounts[r.node].dir, r.name)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d, %s: %v", readers[i].node, readers[i].name, err)
		}
	}
	for e := range epochs {
		for _, g := range []struct {
			prefix string
			drop   bool
		}{{"pad/", false}, {"drop/", true}} {
			seen := map[int]int{}
			steps, samples, dealt := -1, -1, 0
			for i, r := range readers {
				if !strings.HasPrefix(r.name, g.prefix) {
					continue
				}
				s := len(slices.Compact(slices.Clone(batches[i][e])))
				if steps == -1 {
					steps, samples = s, len(got[i][e])
				}
				if s != steps || len(got[i][e]) != samples {
					t.Fatalf("epoch %d: node %d's %s takes %d steps of %d samples, another rank %d of %d", e, r.node, r.name, s, len(got[i][e]), steps, samples)
				}
				for _, x := range got[i][e] {
					seen[x]++
					dealt++
				}
			}
			want := world * ((n + world - 1) / world)
			if g.drop {
				want = world * (n / world)
			}
			if dealt != want {
				t.Fatalf("epoch %d: the %s ranks of both nodes read %d samples, DistributedSampler deals %d", e, g.prefix, dealt, want)
			}
			for x := range n {
				switch {
				case !g.drop && seen[x] == 0:
					t.Fatalf("epoch %d: sample %d reached no rank of the padded group", e, x)
				case g.drop && seen[x] > 1:
					t.Fatalf("epoch %d: sample %d read %d times by the drop_last group", e, x, seen[x])
				}
			}
		}
		seen := map[int]int{}
		for i, r := range readers {
			if r.name != "own" {
				continue
			}
			if len(got[i][e]) != (n+nodes-1)/nodes {
				t.Fatalf("epoch %d: node %d's own consumer read %d samples, want %d", e, r.node, len(got[i][e]), (n+nodes-1)/nodes)
			}
			for _, x := range got[i][e] {
				seen[x]++
			}
		}
		if len(seen) != n {
			t.Fatalf("epoch %d: the own consumers of both nodes read %d distinct samples of %d", e, len(seen), n)
		}
	}
}

// Two nodes over class-sorted tar shards (2 shards a class, a shard
// memory of 4.65 shards and the shard disk at its default, as
// TestClassSortedShardsMixThroughTheMount): each node reads about half
// the shards' bytes (its run's pieces, at most the two at its ends
// shared), the 4 ranks of one trial read every sample once an epoch
// (drop_last, 400 samples over 4 ranks), and each global batch (the
// ranks' batches of one step, both nodes together) holds at least 0.9 of
// the distinct labels of a uniform shuffle's batch of its size.
func TestTwoNodesReadHalfTheShardsAndMix(t *testing.T) {
	t.Parallel() // see parallelTests
	const images, classes, perShard, per, world, nodes, epochs = 400, 20, 10, 8, 4, 2, 2
	spec := producertest.Shards(t, producertest.Folder(t, images, classes), perShard)
	_, bytes := producertest.ShardFiles(t, spec)
	shard := bytes / (images / perShard)
	memory := fmt.Sprint(shard * 465 / 100)
	index := filepath.Join(t.TempDir(), "index")
	var mounts [nodes]*mountProc
	var ranks [nodes][]string
	for k := range nodes { // node 0 indexes the shards, node 1 reads its index
		mounts[k] = startDaemon(t, "--source", spec, "--batch-size", "16", "--image-size", "8", "--epochs", fmt.Sprint(epochs),
			"--shard-memory", memory, "--shard-disk-dir", producertest.DiskDir(t), "--shard-index", index, "--seed", "3", "--node", fmt.Sprintf("%d/%d", k, nodes))
	}
	for k, d := range mounts {
		ranks[k] = mkNodeGroup(t, d, "g", world, per, k, nodes, true)
	}
	rankBatches := make([][]*batchfile.Batch, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for k := range nodes {
		for _, name := range ranks[k] {
			r := int(name[len(name)-1] - '0')
			wg.Go(func() {
				runtime.LockOSThread() // a lookup and its open from one thread
				rankBatches[r], errs[r] = readBatches(mounts[k].dir, name)
			})
		}
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	var global []*batchfile.Batch // each step's batch across the ranks
	for j := range rankBatches[0] {
		g := &batchfile.Batch{Epoch: rankBatches[0][j].Epoch}
		for r := range world {
			if len(rankBatches[r]) != len(rankBatches[0]) {
				t.Fatalf("rank %d took %d steps, rank 0 %d", r, len(rankBatches[r]), len(rankBatches[0]))
			}
			b := rankBatches[r][j]
			g.Indices, g.Labels = append(g.Indices, b.Indices...), append(g.Labels, b.Labels...)
		}
		global = append(global, g)
	}
	checkExactEpochs(t, global, images, epochs)
	got, uniform := meanDistinct(global), uniformDistinct(images, classes, per*world)
	for k, d := range mounts {
		var doc statusDoc
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(d.dir, "status.json"))), &doc); err != nil {
			t.Fatal(err)
		}
		sh := doc.Shards
		half := bytes/nodes + 2*shard // its run's pieces, the two at its ends perhaps shared
		t.Logf("node %d read %d bytes of the shards' %d, %d in its last epoch (%.2f)", k, sh.ReadBytes, bytes, sh.LastEpochReadBytes, float64(sh.LastEpochReadBytes)/float64(bytes))
		if sh.LastEpochReadBytes == 0 || sh.LastEpochReadBytes > half || sh.ReadBytes > epochs*half {
			t.Fatalf("node %d read %d bytes of %d-byte shards in an epoch (%d in %d epochs): over its half, %d", k, sh.LastEpochReadBytes, bytes, sh.ReadBytes, epochs, half)
		}
	}
	t.Logf("%.2f distinct labels a global batch of %d, a uniform shuffle's %.2f", got, per*world, uniform)
	if got < 0.9*uniform {
		t.Fatalf("a global batch holds %.2f distinct labels, a uniform shuffle's %.2f: under 0.9 of it", got, uniform)
	}
}
