package batchstore

import (
	"fmt"

	"github.com/tsock/tsock/batchstore/internal/plan"
)

// Node is this mount's place among the nodes of trials that span
// several (one tsock a node, docs/ranks.md "Across nodes"): node Index
// of Count serves each consumer its node's share of its data (its
// subset, or all of it), cut along Order, and the ranks Index·W/Count to
// (Index+1)·W/Count−1 of a group of world W. The zero value (and a Count
// of 1) is one node: every consumer gets all its data.
type Node struct {
	Index, Count int
	// Order is the node order: every dataset index once, each piece
	// (shard, row group) kept whole, the same on every node.
	Order []int
}

// one says whether n is a single node.
func (n Node) one() bool { return n.Count <= 1 }

// cut is what of sub (nil: all) the consumer reads on this node, dealing
// its uneven tail as dropLast says: nil (all) on one node; on node K of
// N, its share (plan.NodeSamples), a subset of the user's form that
// holds the same count on every node. A share that holds nothing (fewer
// samples than nodes, with dropLast) is refused.
func (n Node) cut(sub *Subset, dropLast bool) (*Subset, error) {
	if n.one() {
		return sub, nil
	}
	mine := plan.NodeSamples(n.Order, sub.Has, n.Index, n.Count, dropLast)
	in := make([]bool, len(n.Order))
	for _, x := range mine {
		in[x] = true
	}
	cut, err := NewSubset(sub.Form(), len(n.Order), func(i int) bool { return in[i] })
	if err != nil {
		return nil, fmt.Errorf("node %d of %d: %w", n.Index, n.Count, err)
	}
	return cut, nil
}

// ranks is the global ranks of a group of world that this node serves:
// [first, first+here). A world that is not a multiple of the nodes is
// refused: every node serves as many ranks.
func (n Node) ranks(world int) (first, here int, err error) {
	if n.one() {
		return 0, world, nil
	}
	if world%n.Count != 0 {
		return 0, 0, fmt.Errorf("world %d on node %d of %d: must be a multiple of the %d nodes (each serves as many ranks): %w", world, n.Index, n.Count, n.Count, ErrBadRank)
	}
	here = world / n.Count
	return n.Index * here, here, nil
}
