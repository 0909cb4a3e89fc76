package batchstore

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// publishIndices publishes one batch of epoch e holding dataset indices
// idx, at order positions from pos on.
func publishIndices(t *testing.T, s *Store, e, index, pos int, idx ...int32) {
	t.Helper()
	r, err := s.Reserve(context.Background(), int64(10*len(idx)))
	if err != nil {
		t.Fatal(err)
	}
	info := Info{Epoch: e, Index: index, Samples: len(idx), FirstPos: pos, EndPos: pos + len(idx), Indices: idx}
	if _, err := r.Publish(&fakeBlob{size: int64(10 * len(idx))}, info); err != nil {
		t.Fatal(err)
	}
}

func subsetOf(t *testing.T, form string, n int, has func(int) bool) *Subset {
	t.Helper()
	sub, err := NewSubset(form, n, has)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// TestUndecidedConsumersHoldNoPlanBack: a consumer that joined but has
// neither set a subset nor read holds nothing back: the producer passes
// over what only it would want. Once a subset is set, what the producer
// keeps is what the decided consumers want; a consumer whose samples
// were passed over in an epoch is not placed where it would miss them.
func TestUndecidedConsumersHoldNoPlanBack(t *testing.T) {
	const n = 40
	s := New(Config{Limit: 1000, BatchSize: 4, Samples: n, SizeOf: func(k int) int64 { return int64(10 * k) }})
	defer s.Close()
	s.FixOrder(0, func(in map[int]int, _ func(int) bool) map[int]int { return in })
	if !s.Wants(0, 0, 7) {
		t.Error("with nobody joined, the buffer fills with everything")
	}
	mustJoin(t, s, "undecided")
	mustJoin(t, s, "even")
	even := subsetOf(t, "even", n, func(i int) bool { return i%2 == 0 })
	if !s.Wants(0, 1, 9) {
		t.Error("with nobody decided, everything is made")
	}
	if err := s.SetSubset("even", even); err != nil {
		t.Fatal(err)
	}
	if s.Wants(0, 2, 11) {
		t.Error("sample 11 made: only an undecided consumer could want it")
	}
	if !s.Wants(0, 3, 12) {
		t.Error("sample 12 passed over: a decided consumer wants it")
	}
	// "odd" wants 11, passed over in epoch 0: it starts in epoch 1.
	mustJoin(t, s, "odd")
	if err := s.SetSubset("odd", subsetOf(t, "odd", n, func(i int) bool { return i%2 == 1 })); err != nil {
		t.Fatal(err)
	}
	if cs, _ := s.ConsumerSnapshot("odd"); cs.JoinedEpoch != 1 {
		t.Errorf("odd starts in producer epoch %d, want 1: epoch 0 passed over its sample 11", cs.JoinedEpoch)
	}
	// "evens too" wants nothing passed over: it reads epoch 0.
	mustJoin(t, s, "evens-too")
	if err := s.SetSubset("evens-too", even); err != nil {
		t.Fatal(err)
	}
	if cs, _ := s.ConsumerSnapshot("evens-too"); cs.JoinedEpoch != 0 {
		t.Errorf("evens-too starts in producer epoch %d, want 0", cs.JoinedEpoch)
	}
	if s.Wants(0, 4, 13) {
		t.Error("sample 13 made in epoch 0, which no consumer of odds reads")
	}
	if !s.Wants(1, 0, 13) {
		t.Error("sample 13 passed over in epoch 1, which odd reads")
	}
	// The undecided one, reading now, wants everything: epoch 0 passed
	// samples over, so it starts in epoch 1 too.
	publishIndices(t, s, 0, 0, 0, 7, 9, 12)
	gone, cancel := context.WithCancel(context.Background())
	cancel() // it decides, then its wait ends at once
	if _, err := s.Lookup(gone, "undecided", 0, 1); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("lookup: %v", err)
	}
	if cs, _ := s.ConsumerSnapshot("undecided"); cs.JoinedEpoch != 1 {
		t.Errorf("undecided starts in producer epoch %d, want 1", cs.JoinedEpoch)
	}
}

// TestAStuckSparseConsumerGetsAShortBatch: the buffer is full, the
// producer waits for room, and the consumer that holds the oldest batch
// needs more of its sparse subset than the buffer holds for its next
// batch. It gets what is held as a short batch (and reads on: its epoch
// stays exact), never a deadlock.
func TestAStuckSparseConsumerGetsAShortBatch(t *testing.T) {
	const n = 16
	s := New(Config{Limit: 80, BatchSize: 4, Samples: n, SizeOf: func(k int) int64 { return int64(10 * k) }})
	defer s.Close()
	mustJoin(t, s, "sparse")
	if err := s.SetBatchSize("sparse", 2); err != nil {
		t.Fatal(err)
	}
	// Its first batch is samples 0 and 12: in producer batches 0 and 3,
	// and the buffer holds two.
	if err := s.SetSubset("sparse", subsetOf(t, "two", n, func(i int) bool { return i == 0 || i == 12 })); err != nil {
		t.Fatal(err)
	}
	s.FixOrder(0, func(in map[int]int, _ func(int) bool) map[int]int { return in })
	publishIndices(t, s, 0, 0, 0, 0, 1, 2, 3)
	publishIndices(t, s, 0, 1, 4, 4, 5, 6, 7)
	waiting := make(chan error, 1)
	go func() {
		r, err := s.Reserve(context.Background(), 40) // waits: the buffer is full
		if err == nil {
			r.Cancel()
		}
		waiting <- err
	}()
	ref, err := s.Lookup(context.Background(), "sparse", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Samples != 1 {
		t.Errorf("batch 0 holds %d samples, want the 1 held", ref.Samples)
	}
	if cs, _ := s.ConsumerSnapshot("sparse"); cs.ShortBatches != 1 || !strings.Contains(cs.Text(), "short batches: 1") {
		t.Errorf("status: %d short batches, text %q", cs.ShortBatches, cs.Text())
	}
	l, err := open(s, "sparse", ref, 1)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if err := <-waiting; err != nil {
		t.Errorf("the producer's wait: %v", err)
	}
}

// TestReadingEverythingBesideASparseSubsetIsRefusedAtOnce: a consumer
// that starts reading all of the data where a sparse subset is read
// beside it would make that subset's batches span more than the buffer
// holds: its first lookup fails with EDEADLK naming the fix, and leaves
// the plan as it was.
func TestReadingEverythingBesideASparseSubsetIsRefusedAtOnce(t *testing.T) {
	const n = 400
	s := New(Config{Limit: 200, BatchSize: 4, Samples: n, SizeOf: func(k int) int64 { return int64(10 * k) }})
	defer s.Close()
	mustJoin(t, s, "sparse")
	if err := s.SetSubset("sparse", subsetOf(t, "tenth", n, func(i int) bool { return i%10 == 0 })); err != nil {
		t.Fatal(err)
	}
	mustJoin(t, s, "all")
	gone, cancel := context.WithCancel(context.Background())
	cancel() // refused before any wait
	_, err := s.Lookup(gone, "all", 0, 1)
	if !errors.Is(err, ErrDeadlock) || !strings.Contains(err.Error(), "sparse") || !strings.Contains(err.Error(), "raise the buffer size") {
		t.Fatalf("lookup: %v, want EDEADLK naming sparse and the fix", err)
	}
	if w, _ := s.dem.wantedIn(0); w == nil {
		t.Error("the refused reader widened the plan to everything")
	}
}

// TestAStitchedEpochEndsAtItsSamplesNotItsPositions: a consumer split mid-
// epoch ends its first epoch where its split's prefix ends in the next
// producer epoch. That end is an order position; where the producer
// passed over positions before it (their only reader left after the
// plan), fewer samples were published before it, and the epoch ends that
// many samples sooner: else it would read on into samples it read
// already (the duplicates a sweep of 200 trials met).
func TestAStitchedEpochEndsAtItsSamplesNotItsPositions(t *testing.T) {
	const n = 16
	s := New(Config{Limit: 10000, BatchSize: 4, Samples: n, Epochs: 3, SizeOf: func(k int) int64 { return int64(10 * k) }})
	defer s.Close()
	identity := func(in map[int]int, _ func(int) bool) map[int]int { return in }
	s.FixOrder(0, identity)
	mustJoin(t, s, "all")
	if err := s.SetSubset("all", nil); err != nil {
		t.Fatal(err)
	}
	keepAll := func(e, from int, idx ...int) {
		for k, x := range idx {
			if !s.Wants(e, from+k, x) {
				t.Fatalf("epoch %d: sample %d passed over", e, x)
			}
		}
	}
	keepAll(0, 0, 0, 1, 2, 3)
	publishIndices(t, s, 0, 0, 0, 0, 1, 2, 3)
	read(t, s, "all", 0, 1) // the first batch is read and freed: a joiner now splits
	mustJoin(t, s, "even")
	even := subsetOf(t, "even", n, func(i int) bool { return i%2 == 0 })
	if err := s.SetSubset("even", even); err != nil {
		t.Fatal(err)
	}
	keepAll(0, 4, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
	for k := 1; k < 4; k++ {
		publishIndices(t, s, 0, k, 4*k, int32(4*k), int32(4*k+1), int32(4*k+2), int32(4*k+3))
	}
	// Epoch 1: what "even" missed (positions 0-3 of epoch 0) first, as
	// the producer stitches it: 3 1 2 0, then the rest.
	var split map[int]int
	s.FixOrder(1, func(in map[int]int, _ func(int) bool) map[int]int {
		split = in
		out := map[int]int{}
		for id := range in {
			out[id] = 4
		}
		return out
	})
	if len(split) != 1 {
		t.Fatalf("splits at epoch 1's plan: %v, want the one of \"even\"", split)
	}
	// "all" leaves: its odd samples in even's prefix are passed over.
	if err := s.Leave("all"); err != nil {
		t.Fatal(err)
	}
	order := []int{3, 1, 2, 0, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	var made []int32
	var at []int
	for pos, x := range order {
		if s.Wants(1, pos, x) {
			made, at = append(made, int32(x)), append(at, pos)
		}
	}
	for k := 0; k < len(made); k += 4 {
		publishIndices(t, s, 1, k/4, at[k], made[k:k+4]...)
	}
	refs, err := s.Pending("even")
	if err != nil {
		t.Fatal(err)
	}
	first, sizes := 0, []int{}
	for _, r := range refs {
		if r.Epoch == 0 {
			first += r.Samples
			sizes = append(sizes, r.Samples)
		}
	}
	if first != 8 {
		t.Fatalf("even's first epoch holds %d samples in batches of %v, want its 8 (6 after its split in epoch 0, then 0 and 2)", first, sizes)
	}
}
