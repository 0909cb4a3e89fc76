package batchstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tsock/tsock/batchstore/waittest"
)

// groupRig is a store whose producer publishes epochs of a shuffled
// dataset of n samples in batches of 4, and remembers each batch's
// dataset indices, so that a rank's batch can be read back as indices.
type groupRig struct {
	s       *Store
	n       int
	mu      sync.Mutex
	indices map[uint64][]int32 // by producer batch
	// wantedOnly: each epoch holds only what some consumer wants, as the
	// producer's do (the samples of no consumer's subset left out).
	wantedOnly bool
}

func newGroupRig(n, epochs int) *groupRig {
	return &groupRig{
		s:       New(Config{Limit: 400, BatchSize: 4, Samples: n, Epochs: epochs, SizeOf: func(k int) int64 { return int64(10 * k) }}),
		n:       n,
		indices: map[uint64][]int32{},
	}
}

// produce publishes epochs of the dataset, each a new permutation (of
// what is wanted, with wantedOnly).
func (g *groupRig) produce(t *testing.T, epochs int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 3))
	ctx := context.Background()
	for e := range epochs {
		var order []int
		g.s.FixOrder(e, func(in map[int]int, wanted func(int) bool) map[int]int {
			for _, x := range rng.Perm(g.n) {
				if !g.wantedOnly || wanted(x) {
					order = append(order, x)
				}
			}
			return in
		})
		for pos := 0; pos < len(order); pos += 4 {
			k := min(4, len(order)-pos)
			idx := make([]int32, k)
			for i := range k {
				idx[i] = int32(order[pos+i])
			}
			r, err := g.s.Reserve(ctx, int64(10*k))
			if errors.Is(err, ErrClosed) { // the test is over: nobody reads on
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			info := Info{Epoch: e, Index: pos / 4, Samples: k, FirstPos: pos, EndPos: pos + k, Indices: idx, Last: pos+k == len(order)}
			g.mu.Lock()
			seq, err := r.Publish(&fakeBlob{size: int64(10 * k)}, info)
			g.indices[seq] = idx
			g.mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
		}
	}
	g.s.Finish()
}

// readAll reads consumer (or rank) name to its end: per epoch, its
// batches' dataset indices.
func (g *groupRig) readAll(name string, caller CallerID) (map[int][][]int32, error) {
	got := map[int][][]int32{}
	for j := uint64(0); ; j++ {
		ref, err := g.s.Lookup(context.Background(), name, j, caller)
		if errors.Is(err, ErrNotFound) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		l, err := open(g.s, name, ref, caller)
		if err != nil {
			return got, err
		}
		var batch []int32
		g.mu.Lock()
		for _, p := range ref.Pieces {
			batch = append(batch, g.indices[p.Seq][p.From:p.To]...)
		}
		g.mu.Unlock()
		l.Release()
		if len(batch) != ref.Samples {
			return got, fmt.Errorf("%s/%d: %d samples in its pieces, %d said", name, j, len(batch), ref.Samples)
		}
		got[ref.Epoch] = append(got[ref.Epoch], batch)
	}
}

func joinGroup(t *testing.T, s *Store, name string, world, per int, drop bool) {
	t.Helper()
	mustJoin(t, s, name)
	if err := s.SetBatchSize(name, per); err != nil {
		t.Fatal(err)
	}
	if err := s.SetWorld(name, world); err != nil {
		t.Fatal(err)
	}
	if err := s.SetDropLast(name, drop); err != nil {
		t.Fatal(err)
	}
}

// The ranks of a group read, in parallel with a consumer of the whole
// data, exact epochs between them: each epoch every sample once across
// the ranks (padded: every one, fewer than world repeated; dropped:
// fewer than world left out, none twice), every rank the same number of
// batches of its batch size but the last, and a new deal each epoch.
func TestGroupRanksDealEachEpoch(t *testing.T) {
	const n, epochs = 23, 3
	for _, drop := range []bool{false, true} {
		t.Run(fmt.Sprintf("drop_last=%v", drop), func(t *testing.T) {
			g := newGroupRig(n, epochs)
			defer g.s.Close()
			const world, per = 3, 2
			joinGroup(t, g.s, "g", world, per, drop)
			mustJoin(t, g.s, "all")
			for r := range world {
				if err := g.s.JoinRank("g", r); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			wg.Go(func() { g.produce(t, epochs, 1) })
			got := make([]map[int][][]int32, world)
			errs := make([]error, world+1)
			// A reader that fails closes the store: the others' waits end.
			for r := range world {
				wg.Go(func() {
					if got[r], errs[r] = g.readAll(RankName("g", r), CallerID(10+r)); errs[r] != nil {
						g.s.Close()
					}
				})
			}
			var all map[int][][]int32
			wg.Go(func() {
				if all, errs[world] = g.readAll("all", 99); errs[world] != nil {
					g.s.Close()
				}
			})
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Fatalf("reader %d: %v", r, err)
				}
			}
			if len(all) != epochs {
				t.Fatalf("the whole-data consumer read %d epochs", len(all))
			}
			var deals [][]int32
			for e := range epochs {
				seen := map[int32]int{}
				for r := range world {
					batches := got[r][e]
					if len(batches) != len(got[0][e]) {
						t.Fatalf("epoch %d: rank %d read %d batches, rank 0 %d", e, r, len(batches), len(got[0][e]))
					}
					for k, b := range batches {
						if k < len(batches)-1 && len(b) != per {
							t.Fatalf("epoch %d: rank %d's batch %d holds %d samples, not %d", e, r, k, len(b), per)
						}
						if len(b) != len(got[0][e][k]) {
							t.Fatalf("epoch %d batch %d: rank %d has %d samples, rank 0 %d", e, k, r, len(b), len(got[0][e][k]))
						}
						for _, x := range b {
							seen[x]++
						}
					}
				}
				missed, repeats := 0, 0
				for x := range int32(n) {
					if seen[x] == 0 {
						missed++
					}
					repeats += max(seen[x]-1, 0)
				}
				if drop && (repeats != 0 || missed != n%world) || !drop && (missed != 0 || repeats != (world-n%world)%world) {
					t.Fatalf("epoch %d: %d samples missed, %d repeated (drop_last %v)", e, missed, repeats, drop)
				}
				deals = append(deals, slices.Concat(got[0][e]...))
			}
			if slices.Equal(deals[0], deals[1]) {
				t.Fatalf("rank 0 was dealt the same samples in epochs 0 and 1: %v", deals[0])
			}
		})
	}
}

// Ranks wait until every rank has joined; a bad world, rank or setting
// is refused naming what and where, and changes nothing.
func TestGroupRefusesWhatDisagrees(t *testing.T) {
	s := New(Config{Limit: 400, BatchSize: 4, Samples: 20, SizeOf: func(k int) int64 { return int64(10 * k) }})
	defer s.Close()
	joinGroup(t, s, "g", 2, 3, false)
	for _, tc := range []struct {
		what string
		err  error
		want error
		in   string
	}{
		{"world 0", s.SetWorld("g", 0), nil, ""},
		{"rank 2 of 2", s.JoinRank("g", 2), ErrBadRank, "ranks 0 to 1"},
		{"rank -1", s.JoinRank("g", -1), ErrBadRank, "ranks 0 to 1"},
		{"rank of a plain consumer", func() error { mustJoin(t, s, "plain"); return s.JoinRank("plain", 0) }(), ErrBadRank, "not a group"},
		{"rank 0", s.JoinRank("g", 0), nil, ""},
		{"rank 0 again", s.JoinRank("g", 0), ErrExists, "claimed already"},
		{"world 4 after rank 0 joined in 2", s.SetWorld("g", 4), ErrBadRank, "world of 2"},
		{"the same world again", s.SetWorld("g", 2), nil, ""},
		{"batch size 5 after a rank joined with 3", s.SetBatchSize("g", 5), ErrBusy, "batch size 3"},
		{"drop_last after a rank joined", s.SetDropLast("g", true), ErrBusy, "fixed"},
		{"the group's own batch", func() error { _, err := s.Lookup(context.Background(), "g", 0, 1); return err }(), ErrNotFound, "its ranks read"},
		{"leaving a group with ranks", s.Leave("g"), ErrNotEmpty, "rank 0"},
	} {
		if tc.want == nil && tc.what == "world 0" {
			if !errors.Is(tc.err, ErrBadRank) {
				t.Errorf("%s: %v, want refused", tc.what, tc.err)
			}
			continue
		}
		if !errors.Is(tc.err, tc.want) || tc.want != nil && !strings.Contains(tc.err.Error(), tc.in) {
			t.Errorf("%s: %v, want %v saying %q", tc.what, tc.err, tc.want, tc.in)
		}
	}
	if w, _ := s.World("g"); w != 2 {
		t.Fatalf("world %d after the refusals", w)
	}
	if bs, _ := s.BatchSize("g"); bs != 3 {
		t.Fatalf("batch size %d after the refusals", bs)
	}
	// Rank 0 waits for rank 1: its lookup ends only with its context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	publishIndices(t, s, 0, 0, 0, 0, 1, 2, 3)
	if _, err := s.Lookup(ctx, RankName("g", 0), 0, 1); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("rank 0 of 2, alone: %v, want a wait", err)
	}
	if cs, _ := s.ConsumerSnapshot("g"); !slices.Equal(cs.Missing, []int{1}) {
		t.Fatalf("the group's missing ranks: %v", cs.Missing)
	}
	// Before the group read anything, a rank that leaves only frees its
	// number: the group has not failed, and the number may be claimed.
	if err := s.LeaveRank(RankName("g", 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.JoinRank("g", 0); err != nil {
		t.Fatalf("rank 0 again after it left before the start: %v", err)
	}
	if cs, _ := s.ConsumerSnapshot("g"); cs.Evicted != "" {
		t.Fatalf("a rank that left before the start failed the group: %s", cs.Evicted)
	}
}

// A rank that leaves before its end, or whose process closes its alive
// file, fails its group: every rank's lookup fails at once, saying why,
// and the buffer is the other consumers'.
func TestARankGoneFailsItsGroup(t *testing.T) {
	for _, how := range []string{"rmdir", "alive closed"} {
		t.Run(how, func(t *testing.T) {
			g := newGroupRig(40, 1)
			defer g.s.Close()
			joinGroup(t, g.s, "g", 2, 2, false)
			for r := range 2 {
				if err := g.s.JoinRank("g", r); err != nil {
					t.Fatal(err)
				}
			}
			if err := g.s.RankOpened(RankName("g", 1)); err != nil {
				t.Fatal(err)
			}
			publishIndices(t, g.s, 0, 0, 0, 0, 1, 2, 3)
			read(t, g.s, RankName("g", 0), 0, 1)
			read(t, g.s, RankName("g", 1), 0, 2)
			// Rank 0 waits for its next batch; rank 1 goes.
			waited := make(chan error, 1)
			go func() {
				_, err := g.s.Lookup(context.Background(), RankName("g", 0), 1, 1)
				waited <- err
			}()
			if how == "rmdir" {
				if err := g.s.LeaveRank(RankName("g", 1)); err != nil {
					t.Fatal(err)
				}
			} else {
				g.s.RankClosed(RankName("g", 1))
			}
			if err := <-waited; !errors.Is(err, ErrEvicted) || !strings.Contains(err.Error(), "rank 1") {
				t.Fatalf("rank 0's wait: %v, want the group failed naming rank 1", err)
			}
			if cs, _ := g.s.ConsumerSnapshot(RankName("g", 0)); cs.State() != "evicted" || !strings.Contains(cs.Evicted, "group failed") {
				t.Fatalf("rank 0's state %q (%s)", cs.State(), cs.Evicted)
			}
		})
	}
}

// A rank that read to its end may go, its last batch still open: its
// group does not fail, and its peer reads to its own end.
func TestARankAtItsEndMayLeave(t *testing.T) {
	g := newGroupRig(8, 1)
	defer g.s.Close()
	joinGroup(t, g.s, "g", 2, 2, false)
	for r := range 2 {
		if err := g.s.JoinRank("g", r); err != nil {
			t.Fatal(err)
		}
	}
	g.produce(t, 1, 5)
	// Rank 0 reads its two batches, the last still open (a loader asks
	// for the next while it trains on the last), finds its end, leaves.
	read(t, g.s, RankName("g", 0), 0, 1)
	ref, err := g.s.Lookup(context.Background(), RankName("g", 0), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	last, err := open(g.s, RankName("g", 0), ref, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer last.Release()
	if _, err := g.s.Lookup(context.Background(), RankName("g", 0), 2, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rank 0 past its end: %v", err)
	}
	if err := g.s.LeaveRank(RankName("g", 0)); err != nil {
		t.Fatal(err)
	}
	got, err := g.readAll(RankName("g", 1), 2)
	if err != nil || len(got[0]) != 2 {
		t.Fatalf("rank 1 after rank 0 left at its end: %v, %d batches", err, len(got[0]))
	}
}

// A rank that stalls (alive, not reading) while the other waits for a
// batch that only its reading makes room for fails the group after the
// consumer timeout, naming it: the waiting rank's lookup fails, and the
// buffer is freed for the producer.
func TestAStalledRankFailsItsGroupAfterTheTimeout(t *testing.T) {
	s := New(Config{Limit: 80, BatchSize: 2, Samples: 40, SizeOf: func(k int) int64 { return int64(10 * k) }})
	defer s.Close()
	joinGroup(t, s, "g", 2, 2, false)
	for r := range 2 {
		if err := s.JoinRank("g", r); err != nil {
			t.Fatal(err)
		}
	}
	mustJoin(t, s, "a") // another consumer, which has read what is held
	s.FixOrder(0, func(in map[int]int, _ func(int) bool) map[int]int { return in })
	for k := range 4 { // a full buffer: 8 samples, two rounds
		publishIndices(t, s, 0, k, 2*k, int32(2*k), int32(2*k+1))
	}
	for j := range uint64(4) {
		read(t, s, "a", j, 3)
	}
	read(t, s, RankName("g", 0), 0, 1)
	read(t, s, RankName("g", 0), 1, 1)
	waited := make(chan error, 1)
	go func() { // rank 0's third batch: only rank 1's reading makes room
		_, err := s.Lookup(context.Background(), RankName("g", 0), 2, 1)
		waited <- err
	}()
	waittest.Until(t, "rank 0 waits", func() bool {
		cs, _ := s.ConsumerSnapshot(RankName("g", 0))
		return cs.Waiting
	})
	room := make(chan error, 1)
	go func() {
		r, err := s.Reserve(context.Background(), 20)
		if err == nil {
			r.Cancel()
		}
		room <- err
	}()
	waittest.Until(t, "the producer waits for room", func() bool { return s.Snapshot().ProducerWaiting })
	evicted, err := endsAtTheTimeout(t, s, policy, waited)
	if !slices.Equal(evicted, []string{"g"}) || !errors.Is(err, ErrEvicted) || !strings.Contains(err.Error(), "rank [1] did not read its batch 0") {
		t.Fatalf("evicted %v; rank 0's wait: %v", evicted, err)
	}
	if err := <-room; err != nil {
		t.Fatalf("the producer after the group failed: %v", err)
	}
}
