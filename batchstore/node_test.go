package batchstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// Across nodes, each node's store serves its consumers their node's
// share of their data: over random datasets, node counts, worlds,
// batch sizes, subsets (all, or a fold) and drop_last, the ranks of
// one group spread over every node's store, read in parallel, take the
// same steps of the same samples, and between them read
// DistributedSampler's count each epoch (W·⌈T/W⌉: every sample at least
// once; with drop_last W·⌊T/W⌋, none twice), T the group's data.
func TestNodesServeAGroupAsDistributedSampler(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 2))
	for trial := range 40 {
		n := 8 + rng.IntN(60)
		nodes := 1 + rng.IntN(3)
		world := nodes * (1 + rng.IntN(2))
		per, drop, epochs := 1+rng.IntN(3), rng.IntN(2) == 0, 2
		subset := "all"
		if rng.IntN(2) == 0 {
			subset = fmt.Sprintf("fold %d/3", 1+rng.IntN(3))
		}
		order := rng.Perm(n) // the node order
		sub, err := ParseSubset([]byte(subset), Dataset{Len: n, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		total := sub.Len()
		if sub == nil {
			total = n
		}
		if drop && total < world {
			continue
		}
		what := fmt.Sprintf("trial %d: %d samples, %s (%d), %d nodes, world %d, batch %d, drop_last %v", trial, n, subset, total, nodes, world, per, drop)
		rigs := make([]*groupRig, nodes)
		var names [][]string
		for k := range nodes {
			rigs[k] = newGroupRig(n, epochs)
			rigs[k].s = New(Config{Limit: 400, BatchSize: 4, Samples: n, Epochs: epochs, SizeOf: func(k int) int64 { return int64(10 * k) },
				Node: Node{Index: k, Count: nodes, Order: order}})
			rigs[k].wantedOnly = true
			joinGroup(t, rigs[k].s, "g", world, per, drop)
			if err := rigs[k].s.SetSubset("g", sub); err != nil {
				t.Fatalf("%s: node %d: %v", what, k, err)
			}
			var mine []string
			for r := k * world / nodes; r < (k+1)*world/nodes; r++ {
				if err := rigs[k].s.JoinRank("g", r); err != nil {
					t.Fatalf("%s: node %d: rank %d: %v", what, k, r, err)
				}
				mine = append(mine, RankName("g", r))
			}
			names = append(names, mine)
		}
		var wg, producers sync.WaitGroup
		got := map[string]map[int][][]int32{}
		var mu sync.Mutex
		errs := make(chan error, world+nodes)
		for k, rig := range rigs {
			producers.Go(func() { rig.produce(t, epochs, uint64(trial*10+k)) })
			for r, name := range names[k] {
				wg.Go(func() {
					batches, err := rig.readAll(name, CallerID(100+r))
					if err != nil {
						errs <- fmt.Errorf("node %d, %s: %w", k, name, err)
					}
					mu.Lock()
					got[name] = batches
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		for _, rig := range rigs { // a producer whose readers failed waits for room
			rig.s.Shutdown()
		}
		producers.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("%s: %v", what, err)
		}
		for e := range epochs {
			seen := map[int32]int{}
			steps, samples, dealt := -1, -1, 0
			for name, byEpoch := range got {
				count := 0
				for _, b := range byEpoch[e] {
					for _, x := range b {
						if !sub.Has(int(x)) {
							t.Fatalf("%s: epoch %d: %s read %d, not in %s", what, e, name, x, subset)
						}
						seen[x]++
						count++
					}
				}
				if steps == -1 {
					steps, samples = len(byEpoch[e]), count
				}
				if len(byEpoch[e]) != steps || count != samples {
					t.Fatalf("%s: epoch %d: %s took %d steps of %d samples, another rank %d of %d", what, e, name, len(byEpoch[e]), count, steps, samples)
				}
				dealt += count
			}
			want := world * ((total + world - 1) / world)
			if drop {
				want = world * (total / world)
			}
			if dealt != want {
				t.Fatalf("%s: epoch %d: %d dealt across the nodes, DistributedSampler deals %d", what, e, dealt, want)
			}
			for x, k := range seen {
				if drop && k > 1 {
					t.Fatalf("%s: epoch %d: sample %d read %d times with drop_last", what, e, x, k)
				}
			}
			if !drop && len(seen) != total {
				t.Fatalf("%s: epoch %d: %d of the %d samples read", what, e, len(seen), total)
			}
		}
	}
}

// A node serves only its ranks of a group, and a world its nodes can
// split evenly: refused at once, naming the node's ranks, nothing
// changed.
func TestANodeRefusesRanksNotItsOwn(t *testing.T) {
	s := New(Config{Limit: 400, BatchSize: 4, Samples: 10, SizeOf: func(k int) int64 { return int64(10 * k) },
		Node: Node{Index: 1, Count: 2, Order: []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}}})
	mustJoin(t, s, "g")
	if err := s.SetWorld("g", 3); !errors.Is(err, ErrBadRank) {
		t.Fatalf("world 3 on 2 nodes: %v", err)
	}
	if err := s.SetWorld("g", 4); err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{0, 1, 4} {
		if err := s.JoinRank("g", r); !errors.Is(err, ErrBadRank) || (r < 4 && !strings.Contains(err.Error(), "node 1 of 2 serves ranks 2 to 3")) {
			t.Fatalf("rank %d on node 1 of 2: %v", r, err)
		}
	}
	for _, r := range []int{2, 3} {
		if err := s.JoinRank("g", r); err != nil {
			t.Fatalf("rank %d on node 1 of 2: %v", r, err)
		}
	}
	snap, err := s.ConsumerSnapshot("g")
	if err != nil {
		t.Fatal(err)
	}
	if snap.World != 4 || len(snap.Ranks) != 2 || snap.Ranks[0].Rank != 2 || len(snap.Missing) != 0 || snap.SubsetLen != 5 {
		t.Fatalf("node 1's group: world %d, ranks %+v, missing %v, %d samples", snap.World, snap.Ranks, snap.Missing, snap.SubsetLen)
	}
}

// A group whose next round spans more than the buffer holds (its
// subset locally sparse: 3 samples at the stream's start, the rest far
// after, beside a consumer of all the data that holds what it has not
// read) takes a short round on one node, which all its ranks share; on
// a node of several it fails instead, loudly, naming why: a short round
// would leave this node's ranks a step apart from the other nodes' (DDP
// waits for them forever).
func TestAStuckGroupAcrossNodesFailsInsteadOfShortening(t *testing.T) {
	const n = 60
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	for _, nodes := range []int{1, 2} {
		// 6 batches of 4, enough for the group's average round of 4 (5
		// batches on node 0 of 2: 12 of the 39 samples made); its first
		// spans 11.
		s := New(Config{Limit: 240, BatchSize: 4, Samples: n, Epochs: 1, SizeOf: func(k int) int64 { return int64(10 * k) },
			Node: Node{Index: 0, Count: nodes, Order: order}})
		mustJoin(t, s, "all")
		if err := s.SetSubset("all", nil); err != nil { // decided: what it wants is made
			t.Fatal(err)
		}
		joinGroup(t, s, "g", 2*nodes, 2, false)
		sub, err := NewSubset("sparse", n, func(i int) bool { return i < 3 || i >= 40 })
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SetSubset("g", sub); err != nil {
			t.Fatal(err)
		}
		for r := range 2 {
			if err := s.JoinRank("g", r); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			s.FixOrder(0, func(in map[int]int, _ func(int) bool) map[int]int { return in })
			for pos := 0; pos < n; pos += 4 {
				r, err := s.Reserve(context.Background(), 40)
				if err != nil {
					return // the test is over: shut down
				}
				idx := []int32{int32(pos), int32(pos + 1), int32(pos + 2), int32(pos + 3)}
				if _, err := r.Publish(&fakeBlob{size: 40}, Info{Epoch: 0, Index: pos / 4, Samples: 4, FirstPos: pos, EndPos: pos + 4, Indices: idx, Last: pos+4 == n}); err != nil {
					t.Error(err)
					return
				}
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = s.Lookup(ctx, "g/0", 0, 1)
		cancel()
		s.Shutdown()
		wg.Wait()
		switch {
		case nodes == 1 && err != nil:
			t.Fatalf("one node: %v, want a short round", err)
		case nodes > 1 && (!errors.Is(err, ErrEvicted) || !strings.Contains(err.Error(), "a step apart from the other nodes'")):
			t.Fatalf("node 0 of %d: %v, want the group failed saying why", nodes, err)
		}
	}
}
