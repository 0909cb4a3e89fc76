package batchstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/tsock/tsock/batchstore/waittest"
)

type fakeBlob struct {
	size  int64
	freed atomic.Int32
}

func (f *fakeBlob) Size() int64 { return f.size }
func (f *fakeBlob) Fd() int     { return -1 }
func (f *fakeBlob) ReadAt(p []byte, off int64) (int, error) {
	if f.freed.Load() != 0 {
		return 0, errors.New("read after free")
	}
	return len(p), nil
}
func (f *fakeBlob) Free() error {
	if f.freed.Add(1) != 1 {
		return errors.New("double free")
	}
	return nil
}

// publish reserves and publishes one batch of size bytes.
func publish(t *testing.T, s *Store, size int64, epoch, index int) (*fakeBlob, uint64) {
	t.Helper()
	r, err := s.Reserve(context.Background(), size)
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	blob := &fakeBlob{size: size}
	seq, err := r.Publish(blob, Info{Epoch: epoch, Index: index, Samples: 1, FirstPos: index, EndPos: index + 1})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return blob, seq
}

// read looks up, opens and releases consumer name's batch local.
func read(t *testing.T, s *Store, name string, local uint64, caller CallerID) Ref {
	t.Helper()
	ref, err := s.Lookup(context.Background(), name, local, caller)
	if err != nil {
		t.Fatalf("lookup %s/%d: %v", name, local, err)
	}
	l, err := open(s, name, ref, caller)
	if err != nil {
		t.Fatalf("open %s/%d: %v", name, local, err)
	}
	if l.Consumer() != name {
		t.Fatalf("open %s/%d charged to %s", name, local, l.Consumer())
	}
	l.Release()
	return ref
}

// open opens ref as the file system does: by the shared batch for a
// direct batch, by consumer and number for a re-batched one.
func open(s *Store, name string, ref Ref, caller CallerID) (*Lease, error) {
	if ref.Direct {
		return s.Open(ref.Seq, caller)
	}
	return s.OpenBatch(name, ref.Local)
}

func mustJoin(t *testing.T, s *Store, name string) {
	t.Helper()
	if err := s.Join(name); err != nil {
		t.Fatalf("join %s: %v", name, err)
	}
}

func TestReserveBlocksUntilConsumed(t *testing.T) {
	s := New(Config{Limit: 100})
	mustJoin(t, s, "a")
	blob, _ := publish(t, s, 60, 0, 0)
	got := make(chan error, 1)
	go func() {
		r, err := s.Reserve(context.Background(), 60)
		if err == nil {
			r.Cancel()
		}
		got <- err
	}()
	waittest.Until(t, "the store gets there", func() bool { return s.Snapshot().ProducerWaiting })
	select {
	case err := <-got:
		t.Fatalf("reserve over the limit returned: %v", err)
	default:
	}
	read(t, s, "a", 0, 1)
	if err := <-got; err != nil {
		t.Fatalf("reserve after consume: %v", err)
	}
	if blob.freed.Load() != 1 {
		t.Fatal("consumed batch not freed")
	}
}

func TestReserveLargerThanBufferFails(t *testing.T) {
	s := New(Config{Limit: 100})
	if _, err := s.Reserve(context.Background(), 101); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
}

func TestReserveInterrupted(t *testing.T) {
	s := New(Config{Limit: 10})
	publish(t, s, 10, 0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Reserve(ctx, 10); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("got %v, want ErrInterrupted", err)
	}
	if snap := s.Snapshot(); snap.Reserved != 0 || snap.ProducerWaiting {
		t.Fatalf("interrupted reserve left state behind: %+v", snap)
	}
}

func TestBatchesBeforeAnyConsumerAreKept(t *testing.T) {
	s := New(Config{Limit: 1000})
	b0, _ := publish(t, s, 10, 0, 0)
	b1, _ := publish(t, s, 10, 0, 1)
	mustJoin(t, s, "late")
	if ref := read(t, s, "late", 0, 1); ref.Seq != 0 {
		t.Fatalf("late joiner's batch 0 is seq %d, want 0", ref.Seq)
	}
	if b0.freed.Load() != 1 || b1.freed.Load() != 0 {
		t.Fatalf("freed: b0=%d b1=%d, want 1 0", b0.freed.Load(), b1.freed.Load())
	}
}

func TestMemoryIsFreedInOrderAndJoinersStartAtTheOldest(t *testing.T) {
	s := New(Config{Limit: 1000})
	mustJoin(t, s, "a")
	b0, _ := publish(t, s, 10, 0, 0)
	b1, _ := publish(t, s, 10, 0, 1)
	publish(t, s, 10, 0, 2)
	// a holds batch 0 open and consumes 1: nothing is freed before a's
	// lowest unconsumed batch, so the buffer never has holes.
	ref0, _ := s.Lookup(context.Background(), "a", 0, 1)
	l0, err := open(s, "a", ref0, 1)
	if err != nil {
		t.Fatal(err)
	}
	read(t, s, "a", 1, 1)
	if b1.freed.Load() != 0 {
		t.Fatal("batch 1 freed while a still holds batch 0")
	}
	mustJoin(t, s, "b")
	if ref := read(t, s, "b", 0, 2); !ref.Direct || ref.Seq != 0 {
		t.Fatalf("b's batch 0 is %+v, want the shared seq 0", ref)
	}
	l0.Release()
	read(t, s, "b", 1, 2)
	if b0.freed.Load() != 1 || b1.freed.Load() != 1 {
		t.Fatal("batches read by both not freed")
	}
}

func TestLookupBlocksUntilPublished(t *testing.T) {
	s := New(Config{Limit: 1000})
	mustJoin(t, s, "a")
	got := make(chan Ref, 1)
	go func() {
		ref, err := s.Lookup(context.Background(), "a", 0, 1)
		if err != nil {
			t.Errorf("lookup: %v", err)
		}
		got <- ref
	}()
	waittest.Until(t, "the store gets there", func() bool { return s.Snapshot().Consumers[0].Waiting })
	publish(t, s, 10, 0, 0)
	if ref := <-got; ref.Seq != 0 || ref.Size != 10 {
		t.Fatalf("got %+v", ref)
	}
}

func TestLookupErrors(t *testing.T) {
	s := New(Config{Limit: 1000, Epochs: 1, Samples: 2})
	mustJoin(t, s, "a")
	publish(t, s, 10, 0, 0)
	read(t, s, "a", 0, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name  string
		local uint64
		ctx   context.Context
		want  error
	}{
		{"a", 0, context.Background(), ErrNotFound}, // consumed
		{"nobody", 0, context.Background(), ErrNoConsumer},
		{"a", 1, ctx, ErrInterrupted},                        // would block
		{"a", 2, context.Background(), ErrNotFound},          // past one epoch of 2 samples
		{"a", ^uint64(0), context.Background(), ErrNotFound}, // overflow
	}
	for _, tc := range tests {
		if _, err := s.Lookup(tc.ctx, tc.name, tc.local, 1); !errors.Is(err, tc.want) {
			t.Errorf("lookup %s/%d: got %v, want %v", tc.name, tc.local, err, tc.want)
		}
	}
	r, _ := s.Reserve(context.Background(), 10)
	r.Publish(&fakeBlob{size: 10}, Info{Epoch: 0, Index: 1, Samples: 1, FirstPos: 1, EndPos: 2, Last: true})
	read(t, s, "a", 1, 1)
	if cs, _ := s.ConsumerSnapshot("a"); !cs.Done {
		t.Errorf("consumer not done after its epoch: %+v", cs)
	}
	forever := New(Config{Limit: 1000})
	mustJoin(t, forever, "b")
	forever.Finish()
	if _, err := forever.Lookup(context.Background(), "b", 0, 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("lookup after Finish: %v", err)
	}
}

func TestOpenChargedToLookingUpConsumer(t *testing.T) {
	s := New(Config{Limit: 1000})
	mustJoin(t, s, "a")
	mustJoin(t, s, "b")
	blob, _ := publish(t, s, 10, 0, 0)
	if _, err := s.Lookup(context.Background(), "b", 0, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(context.Background(), "a", 0, 8); err != nil {
		t.Fatal(err)
	}
	lb, err := s.Open(0, 7)
	if err != nil || lb.Consumer() != "b" {
		t.Fatalf("caller 7 opened as %v (%v), want b", lb, err)
	}
	la, err := s.Open(0, 8)
	if err != nil || la.Consumer() != "a" {
		t.Fatalf("caller 8 opened as %v (%v), want a", la, err)
	}
	lb.Release()
	if snap, _ := s.ConsumerSnapshot("a"); snap.BatchesRead != 0 {
		t.Fatal("b's release consumed a's batch")
	}
	la.Release()
	if blob.freed.Load() != 1 {
		t.Fatal("batch not freed after both consumed")
	}
}

// TestAnOpenWithoutALookupIsChargedToItsConsumerOrRefused: a reopen
// without a lookup (a caller the store never saw: /proc/self/fd, a
// forked worker) of a batch one consumer looked up is that consumer's; of
// a batch two looked up, it is refused (ErrAmbiguous), and neither
// consumer's batch is consumed by it: each reads its own after. (Before:
// it took whichever lookup a map gave first, and could consume the other
// consumer's batch.)
func TestAnOpenWithoutALookupIsChargedToItsConsumerOrRefused(t *testing.T) {
	s := New(Config{Limit: 1000})
	mustJoin(t, s, "a")
	mustJoin(t, s, "b")
	publish(t, s, 10, 0, 0)
	publish(t, s, 10, 0, 1)
	if _, err := s.Lookup(context.Background(), "a", 0, 7); err != nil {
		t.Fatal(err)
	}
	l, err := s.Open(0, 99)
	if err != nil || l.Consumer() != "a" {
		t.Fatalf("a reopen of a's batch by an unknown caller: %v (%v), want a's", l, err)
	}
	l.Release()
	if _, err := s.Lookup(context.Background(), "a", 1, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(context.Background(), "b", 1, 8); err != nil {
		t.Fatal(err)
	}
	for range 20 { // a map's order varies: any pick would show within a few
		if l, err := s.Open(1, 99); !errors.Is(err, ErrAmbiguous) {
			t.Fatalf("a reopen of a batch a and b looked up: %v (%v), want ErrAmbiguous", l, err)
		}
	}
	for name, caller := range map[string]CallerID{"a": 7, "b": 8} {
		l, err := s.Open(1, caller)
		if err != nil || l.Consumer() != name {
			t.Fatalf("%s's own open: %v (%v)", name, l, err)
		}
		l.Release()
	}
}

// freedLog is an Invalidator that records what it is told.
type freedLog struct{ seqs []uint64 }

func (f *freedLog) Freed(seq uint64) { f.seqs = append(f.seqs, seq) }

// TestTheInvalidatorIsToldOfEveryFree: the store tells its port of a
// batch the moment it frees it (the last consumer's release), once, and
// never before; at Close, of every batch still held.
func TestTheInvalidatorIsToldOfEveryFree(t *testing.T) {
	s := New(Config{Limit: 1000})
	var log freedLog
	s.SetInvalidator(&log)
	mustJoin(t, s, "a")
	mustJoin(t, s, "b")
	publish(t, s, 10, 0, 0)
	publish(t, s, 10, 0, 1)
	read := func(name string, j uint64, caller CallerID) {
		t.Helper()
		ref, err := s.Lookup(context.Background(), name, j, caller)
		if err != nil {
			t.Fatal(err)
		}
		l, err := open(s, name, ref, caller)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
	}
	read("a", 0, 1)
	if len(log.seqs) != 0 {
		t.Fatalf("told of %v while b has yet to read batch 0", log.seqs)
	}
	read("b", 0, 2)
	if fmt.Sprint(log.seqs) != "[0]" {
		t.Fatalf("told of %v once both read batch 0, want [0]", log.seqs)
	}
	s.Close()
	if fmt.Sprint(log.seqs) != "[0 1]" {
		t.Fatalf("told of %v after Close, want [0 1]", log.seqs)
	}
}

func TestOpenLeaseKeepsMemory(t *testing.T) {
	s := New(Config{Limit: 1000})
	mustJoin(t, s, "a")
	mustJoin(t, s, "b")
	blob, _ := publish(t, s, 10, 0, 0)
	ref, _ := s.Lookup(context.Background(), "a", 0, 1)
	l1, _ := s.Open(ref.Seq, 1)
	l2, _ := s.Open(ref.Seq, 1)
	l1.Release()
	if _, err := s.Lookup(context.Background(), "b", 0, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlink("b", 0); err != nil {
		t.Fatal(err)
	}
	if blob.freed.Load() != 0 {
		t.Fatal("freed while a still has a handle open")
	}
	l2.Release()
	l2.Release() // twice is harmless
	if blob.freed.Load() != 1 {
		t.Fatal("not freed after the last release")
	}
}

func TestLeaveReleasesAndLeasesSurvive(t *testing.T) {
	s := New(Config{Limit: 1000})
	mustJoin(t, s, "a")
	mustJoin(t, s, "b")
	blob, _ := publish(t, s, 10, 0, 0)
	read(t, s, "a", 0, 1)
	ref, _ := s.Lookup(context.Background(), "b", 0, 2)
	l, _ := s.Open(ref.Seq, 2)
	if err := s.Leave("b"); err != nil {
		t.Fatal(err)
	}
	if blob.freed.Load() != 0 {
		t.Fatal("freed under an open lease")
	}
	l.Release()
	if blob.freed.Load() != 1 {
		t.Fatal("not freed after the departed consumer's release")
	}
	if err := s.Leave("b"); !errors.Is(err, ErrNoConsumer) {
		t.Fatalf("second leave: %v", err)
	}
}

func TestLeaveWakesItsWaiters(t *testing.T) {
	s := New(Config{Limit: 1000})
	mustJoin(t, s, "a")
	got := make(chan error, 1)
	go func() {
		_, err := s.Lookup(context.Background(), "a", 0, 1)
		got <- err
	}()
	waittest.Until(t, "the store gets there", func() bool { return s.Snapshot().Consumers[0].Waiting })
	if err := s.Leave("a"); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrNoConsumer) {
		t.Fatalf("waiter got %v, want ErrNoConsumer", err)
	}
}

func TestJoinErrors(t *testing.T) {
	s := New(Config{Limit: 1000})
	mustJoin(t, s, "a")
	for _, tc := range []struct {
		name string
		want error
	}{
		{"a", ErrExists}, {"", ErrBadName}, {".hidden", ErrBadName}, {"a/b", ErrBadName},
		{"-x", ErrBadName}, {string(make([]byte, 65)), ErrBadName}, {"sp ace", ErrBadName},
	} {
		if err := s.Join(tc.name); !errors.Is(err, tc.want) {
			t.Errorf("join %q: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := s.Consumers(); len(got) != 1 {
		t.Fatalf("consumers after bad joins: %v", got)
	}
}

func TestCloseFreesAndWakes(t *testing.T) {
	s := New(Config{Limit: 1000})
	mustJoin(t, s, "a")
	blob, _ := publish(t, s, 10, 0, 0)
	got := make(chan error, 1)
	go func() {
		_, err := s.Lookup(context.Background(), "a", 1, 1)
		got <- err
	}()
	waittest.Until(t, "the store gets there", func() bool { return s.Snapshot().Consumers[0].Waiting })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter got %v", err)
	}
	if blob.freed.Load() != 1 {
		t.Fatal("close did not free")
	}
}

// Epochs made before anyone joined are read from the oldest one's start:
// a joiner misses nothing of the head start, and needs no stitching.
func TestJoinerStartsAtTheOldestWholeEpoch(t *testing.T) {
	s := New(Config{Limit: 1000, BatchSize: 1, Epochs: 2, Samples: 2})
	for e := range 3 {
		s.FixOrder(e, func(map[int]int, func(int) bool) map[int]int { return nil })
		for i := range 2 {
			r, err := s.Reserve(context.Background(), 10)
			if err != nil {
				t.Fatal(err)
			}
			info := Info{Epoch: e, Index: i, Samples: 1, FirstPos: i, EndPos: i + 1, Last: i == 1}
			if _, err := r.Publish(&fakeBlob{size: 10}, info); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustJoin(t, s, "late")
	for j := range uint64(4) {
		if ref := read(t, s, "late", j, 1); !ref.Direct || ref.Seq != j || ref.Epoch != int(j/2) {
			t.Fatalf("late joiner's batch %d is %+v, want the shared seq %d of epoch %d", j, ref, j, j/2)
		}
	}
	if _, err := s.Lookup(context.Background(), "late", 4, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("batch 4 after two epochs: %v, want ErrNotFound", err)
	}
}

// A Hold keeps a batch's bytes for the file system's own read-ahead: it
// is charged to no consumer, consumes nothing, and the batch is freed at
// whichever release comes last, the consumer's or the hold's.
func TestHoldKeepsTheBatchAndConsumesNothing(t *testing.T) {
	s := New(Config{Limit: 1000})
	mustJoin(t, s, "a")
	blob, seq := publish(t, s, 10, 0, 0)
	ref, err := s.Lookup(context.Background(), "a", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	hold, err := s.Hold(seq)
	if err != nil {
		t.Fatal(err)
	}
	if hold.Consumer() != "" || hold.Blob() != blob {
		t.Fatalf("hold charged to %q, blob %v", hold.Consumer(), hold.Blob())
	}
	hold.Release()
	if cs, _ := s.ConsumerSnapshot("a"); cs.BatchesRead != 0 || blob.freed.Load() != 0 {
		t.Fatalf("a hold's release consumed or freed the batch: %+v, freed %d", cs, blob.freed.Load())
	}
	hold, _ = s.Hold(seq)
	l, err := open(s, "a", ref, 1)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if cs, _ := s.ConsumerSnapshot("a"); cs.BatchesRead != 1 {
		t.Fatalf("a's release did not consume its batch: %+v", cs)
	}
	if blob.freed.Load() != 0 {
		t.Fatal("freed while held")
	}
	if !s.Holds(seq) {
		t.Fatal("a held batch not held")
	}
	hold.Release()
	hold.Release() // twice is harmless
	if blob.freed.Load() != 1 {
		t.Fatal("not freed after the hold's release")
	}
	if s.Holds(seq) {
		t.Fatal("a freed batch still held")
	}
	if _, err := s.Hold(seq); !errors.Is(err, ErrNotFound) {
		t.Fatalf("hold of a freed batch: %v, want ErrNotFound", err)
	}
}
