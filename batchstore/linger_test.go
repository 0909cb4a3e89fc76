package batchstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore/waittest"
)

// TestLingeringMemoryCountsAgainstTheBuffer: memory of freed batches
// that a reader still maps keeps the producer waiting as held batches
// do, and the producer goes on, without any event, once it is gone.
func TestLingeringMemoryCountsAgainstTheBuffer(t *testing.T) {
	var lingering atomic.Int64
	s := New(Config{Limit: 100, Lingering: lingering.Load})
	mustJoin(t, s, "a")
	publish(t, s, 40, 0, 0)
	read(t, s, "a", 0, 1) // freed, but (say) still mapped:
	lingering.Store(40)
	if snap := s.Snapshot(); snap.Used != 0 || snap.Lingering != 40 {
		t.Fatalf("used %d, lingering %d: want 0 and 40", snap.Used, snap.Lingering)
	}
	publish(t, s, 40, 0, 1) // 40 lingering + 40 held + 40 more: over
	got := make(chan error, 1)
	go func() {
		r, err := s.Reserve(context.Background(), 40)
		if err == nil {
			r.Cancel()
		}
		got <- err
	}()
	waittest.Until(t, "the store gets there", func() bool { return s.Snapshot().LingerBlocked })
	select {
	case err := <-got:
		t.Fatalf("reserve over the limit with lingering memory returned: %v", err)
	default:
	}
	lingering.Store(0) // the reader unmapped: nothing tells the store
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("reserve once the mapping went: %v", err)
		}
	case <-time.After(10 * time.Second): // a bound for the failure, not a wait for success
		t.Fatal("the producer did not notice that the lingering memory went")
	}
	if s.Snapshot().LingerBlocked {
		t.Fatal("still blocked by lingering memory after the reserve")
	}
}

// TestWaitsOnMappedMemoryAreBroken: when every consumer waits and only
// mappings of batches already read keep the producer waiting, no reading
// can end the waits: after the consumer timeout they fail with
// ErrDeadlock under either policy (the store cannot tell whose mappings
// they are, so nobody is evicted), and end to end reading resumes once
// the memory goes.
func TestWaitsOnMappedMemoryAreBroken(t *testing.T) {
	for _, straggler := range []Straggler{Block, Evict} {
		t.Run(string(straggler), func(t *testing.T) {
			var lingering atomic.Int64
			s := New(Config{Limit: 100, Lingering: lingering.Load})
			mustJoin(t, s, "a")
			publish(t, s, 60, 0, 0)
			read(t, s, "a", 0, 1)
			lingering.Store(60)
			room := make(chan error, 1)
			go func() {
				r, err := s.Reserve(context.Background(), 60)
				if err == nil {
					_, err = r.Publish(&fakeBlob{size: 60}, Info{Epoch: 0, Index: 1, Samples: 1, FirstPos: 1, EndPos: 2})
				}
				room <- err
			}()
			waited := make(chan error, 1)
			go func() {
				_, err := s.Lookup(context.Background(), "a", 1, 1)
				waited <- err
			}()
			waittest.Until(t, "the store gets there", func() bool {
				cs, _ := s.ConsumerSnapshot("a")
				return cs.Waiting && s.Snapshot().LingerBlocked
			})
			evicted, err := endsAtTheTimeout(t, s, Eviction{Timeout: 30 * time.Second, Straggler: straggler}, waited)
			if !errors.Is(err, ErrDeadlock) || len(evicted) != 0 {
				t.Fatalf("wait ended with %v, evicted %v: want ErrDeadlock and nobody evicted", err, evicted)
			}
			if cs, _ := s.ConsumerSnapshot("a"); cs.Deadlock == "" {
				t.Fatal("the consumer's status does not say why its waits fail")
			}
			// The reader no longer waits, the mappings still hold the
			// buffer: the next check keeps the reason (before, it cleared
			// it, and status said only "waiting"), and the next open fails
			// at once.
			s.ev.evictStale(time.Now().Add(time.Minute), Eviction{Timeout: 30 * time.Second, Straggler: straggler})
			if cs, _ := s.ConsumerSnapshot("a"); cs.Deadlock == "" {
				t.Fatal("after its EDEADLK, the consumer's status no longer says why")
			}
			if _, err := s.Lookup(context.Background(), "a", 1, 1); !errors.Is(err, ErrDeadlock) {
				t.Fatalf("an open while the mappings hold the buffer: %v, want ErrDeadlock at once", err)
			}
			lingering.Store(0)
			if err := <-room; err != nil {
				t.Fatalf("producer after the mapping went: %v", err)
			}
			read(t, s, "a", 1, 1)
		})
	}
}
