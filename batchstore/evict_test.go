package batchstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore/waittest"
)

// fullBuffer returns a store whose two-batch buffer is full, with a
// producer blocked waiting for room; a has consumed both batches, b none.
func fullBuffer(t *testing.T) (*Store, <-chan error) {
	t.Helper()
	s := New(Config{Limit: 20})
	mustJoin(t, s, "a")
	mustJoin(t, s, "b")
	publish(t, s, 10, 0, 0)
	publish(t, s, 10, 0, 1)
	read(t, s, "a", 0, 1)
	read(t, s, "a", 1, 1)
	room := make(chan error, 1)
	go func() {
		r, err := s.Reserve(context.Background(), 10)
		if err == nil {
			r.Cancel()
		}
		room <- err
	}()
	waittest.Until(t, "the store gets there", func() bool { return s.Snapshot().ProducerWaiting })
	return s, room
}

var policy = Eviction{Timeout: 30 * time.Second, Straggler: Block}

func TestDeadConsumerIsEvictedAfterTheTimeout(t *testing.T) {
	s, room := fullBuffer(t)
	now := time.Now()
	if got := s.ev.evictStale(now, policy); len(got) != 0 {
		t.Fatalf("evicted at once: %v", got)
	}
	if got := s.ev.evictStale(now.Add(29*time.Second), policy); len(got) != 0 {
		t.Fatalf("evicted before the timeout: %v", got)
	}
	if got := s.ev.evictStale(now.Add(31*time.Second), policy); len(got) != 1 || got[0] != "b" {
		t.Fatalf("evicted %v, want [b]", got)
	}
	if err := <-room; err != nil {
		t.Fatalf("producer still blocked after the eviction: %v", err)
	}
	if _, err := s.Lookup(context.Background(), "b", 0, 2); !errors.Is(err, ErrEvicted) {
		t.Fatalf("lookup by the evicted consumer: %v", err)
	}
	cs, err := s.ConsumerSnapshot("b")
	if err != nil || cs.Evicted == "" || cs.Lag != 0 {
		t.Fatalf("evicted consumer's status: %+v %v", cs, err)
	}
	if err := s.Leave("b"); err != nil {
		t.Fatalf("rmdir of an evicted consumer: %v", err)
	}
}

func TestOpenFileOrProgressKeepsAConsumer(t *testing.T) {
	s, _ := fullBuffer(t)
	ref, _ := s.Lookup(context.Background(), "b", 0, 2)
	l, err := s.Open(ref.Seq, 2)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s.ev.evictStale(now, policy)
	if got := s.ev.evictStale(now.Add(time.Hour), policy); len(got) != 0 {
		t.Fatalf("consumer with an open file evicted: %v", got)
	}
	l.Release() // progress: b consumed batch 0
	// The stall clock starts again from the release.
	if got := s.ev.evictStale(time.Now().Add(20*time.Second), policy); len(got) != 0 {
		t.Fatalf("evicted 20s after progress: %v", got)
	}
}

func TestNoEvictionWhileTheProducerHasRoom(t *testing.T) {
	s := New(Config{Limit: 100})
	mustJoin(t, s, "idle")
	publish(t, s, 10, 0, 0)
	now := time.Now()
	s.ev.evictStale(now, policy)
	if got := s.ev.evictStale(now.Add(time.Hour), policy); len(got) != 0 {
		t.Fatalf("idle consumer evicted while nothing waits on it: %v", got)
	}
}

func TestStragglerPolicy(t *testing.T) {
	for _, tc := range []struct {
		straggler Straggler
		want      int
	}{{Block, 0}, {Evict, 1}} {
		s, _ := fullBuffer(t)
		// b is alive (a file open) but slow; a waits for a new batch.
		ref, _ := s.Lookup(context.Background(), "b", 0, 2)
		l, _ := s.Open(ref.Seq, 2)
		waiting := make(chan error, 1)
		go func() { _, err := s.Lookup(context.Background(), "a", 2, 1); waiting <- err }()
		waittest.Until(t, "the store gets there", func() bool { cs, _ := s.ConsumerSnapshot("a"); return cs.Waiting })
		e := Eviction{Timeout: time.Minute, Straggler: tc.straggler}
		now := time.Now()
		s.ev.evictStale(now, e)
		if got := s.ev.evictStale(now.Add(2*time.Minute), e); len(got) != tc.want {
			t.Fatalf("%s: evicted %v, want %d", tc.straggler, got, tc.want)
		}
		l.Release()
		s.Shutdown()
		<-waiting
	}
}

// A consumer waiting for a batch that the full buffer can only make once
// it reads the buffer's oldest batch itself (an open far ahead of its
// position, or more batches kept mapped than the buffer holds) would wait
// forever and stall everyone, its rmdir stuck behind the wait. After the
// timeout without progress its wait fails with ErrDeadlock (block: it is
// kept, and may read on), or it is evicted (evict).
func TestAWaitOnlyTheWaiterCanEndIsBroken(t *testing.T) {
	for _, straggler := range []Straggler{Block, Evict} {
		t.Run(string(straggler), func(t *testing.T) {
			s, room := fullBuffer(t) // b has read nothing; the producer waits for room
			waited := make(chan error, 1)
			go func() {
				_, err := s.Lookup(context.Background(), "b", 5, 2)
				waited <- err
			}()
			waittest.Until(t, "the store gets there", func() bool { cs, _ := s.ConsumerSnapshot("b"); return cs.Waiting })
			evicted, err := endsAtTheTimeout(t, s, Eviction{Timeout: 30 * time.Second, Straggler: straggler}, waited)
			switch straggler {
			case Block:
				if !errors.Is(err, ErrDeadlock) || len(evicted) != 0 {
					t.Fatalf("wait ended with %v, evicted %v: want ErrDeadlock and nobody evicted", err, evicted)
				}
				if _, err := s.Lookup(context.Background(), "b", 0, 2); err != nil {
					t.Fatalf("b reads on after the broken wait: %v", err)
				}
			case Evict:
				if !errors.Is(err, ErrEvicted) || len(evicted) != 1 || evicted[0] != "b" {
					t.Fatalf("wait ended with %v, evicted %v: want b evicted", err, evicted)
				}
				if err := <-room; err != nil {
					t.Fatalf("producer still blocked after the eviction: %v", err)
				}
			}
		})
	}
}

// endsAtTheTimeout applies the eviction rules of p just before and just
// after its timeout, checks that the wait reported on waited lasts until
// then and ends after, and returns who was evicted and how it ended.
func endsAtTheTimeout(t *testing.T, s *Store, p Eviction, waited <-chan error) ([]string, error) {
	t.Helper()
	now := time.Now()
	s.ev.evictStale(now, p)
	s.ev.evictStale(now.Add(p.Timeout-time.Second), p)
	select {
	case err := <-waited:
		t.Fatalf("the wait ended before the timeout: %v", err)
	default:
	}
	evicted := s.ev.evictStale(now.Add(p.Timeout+time.Second), p)
	select {
	case err := <-waited:
		return evicted, err
	case <-time.After(10 * time.Second): // a bound for the failure, not a wait for success
		t.Fatal("the wait did not end after the timeout")
	}
	return nil, nil
}

// Each eviction rule alone, and their order: the first that applies
// decides, a deadlock is not evicted but under --straggler evict, and a
// condition counts only once it has held for the timeout.
func TestEvictionRulesInOrder(t *testing.T) {
	now := time.Unix(1000, 0)
	long, short := now.Add(-2*time.Second), now.Add(-time.Second/2)
	for _, tc := range []struct {
		name      string
		straggler Straggler
		clocks    clocks
		deadlock  string
		want      string // a word of the reason; "" for none
	}{
		{"nothing holds", Block, clocks{}, "", ""},
		{"stalled for the timeout", Block, clocks{stalled: long}, "", "no open file"},
		{"stalled, not yet for the timeout", Block, clocks{stalled: short}, "", ""},
		{"a straggler under block", Block, clocks{straggling: long}, "", ""},
		{"a straggler under evict", Evict, clocks{straggling: long}, "", "held the oldest batch"},
		{"self-blocked under block: a deadlock, not an eviction", Block, clocks{selfBlocked: long, stalled: long}, "raise the buffer size", ""},
		{"self-blocked under evict", Evict, clocks{selfBlocked: long, straggling: long}, "raise the buffer size", "waited"},
		{"self-blocked holding batches", Block, clocks{selfBlocked: long}, "read or unlink", ""},
		{"mapped out: never evicted", Evict, clocks{mappedOut: long, straggling: long}, "mapped", ""},
		{"stalled before straggling", Evict, clocks{stalled: long, straggling: long}, "", "no open file"},
	} {
		c := &consumer{clocks: tc.clocks}
		if tc.name == "self-blocked holding batches" {
			c.handles = map[uint64]int{0: 1}
		}
		ck := &evictionCheck{Eviction: Eviction{Timeout: time.Second, Straggler: tc.straggler}, now: now}
		s := New(Config{Limit: 1})
		dl, _ := s.ev.deadlockOf(c, ck)
		if (dl == "") != (tc.deadlock == "") || !strings.Contains(dl, tc.deadlock) {
			t.Errorf("%s: deadlock %q, want %q", tc.name, dl, tc.deadlock)
		}
		got := evictionFor(c, ck, dl)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: evicted for %q, want %q", tc.name, got, tc.want)
		}
	}
}
