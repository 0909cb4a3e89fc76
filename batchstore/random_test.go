package batchstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// model is what the test expects of one consumer.
type model struct {
	next   uint64 // next local index it will look up
	base   uint64 // seq of its batch 0
	open   []*Lease
	leases map[uint64]int
}

// TestRandomSchedules drives the store through random interleavings of
// publish, join, leave, lookup, open, release and unlink, and checks the
// invariants after every step: the buffer is never over its limit, no
// blob is freed while a lease or a pending consumer needs it, every blob
// is freed once at most, and each consumer sees consecutive batches with
// no gap and no repeat.
func TestRandomSchedules(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runSchedule(t, seed) })
	}
}

func runSchedule(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	const limit = 100
	s := New(limit)
	blobs := map[uint64]*fakeBlob{}
	models := map[string]*model{}
	names := []string{"a", "b", "c", "d"}
	total := 20 + rng.IntN(30)
	published := 0
	ctx := context.Background()
	for step := 0; step < 2000; step++ {
		name := names[rng.IntN(len(names))]
		m := models[name]
		switch op := rng.IntN(7); {
		case op == 0 && published < total:
			size := int64(5 + rng.IntN(30))
			snap := s.Snapshot()
			if snap.Used+snap.Reserved+size > limit {
				continue // would block: that is tested elsewhere
			}
			r, err := s.Reserve(ctx, size)
			if err != nil {
				t.Fatalf("step %d reserve: %v", step, err)
			}
			blob := &fakeBlob{size: size}
			seq, err := r.Publish(blob, Info{Samples: 1})
			if err != nil {
				t.Fatal(err)
			}
			blobs[seq] = blob
			published++
			if published == total {
				s.Finish()
			}
		case op == 1 && m == nil:
			mustJoin(t, s, name)
			snap, _ := s.ConsumerSnapshot(name)
			models[name] = &model{base: snap.JoinedAt, leases: map[uint64]int{}}
		case op == 2 && m != nil && rng.IntN(5) == 0:
			if err := s.Leave(name); err != nil {
				t.Fatal(err)
			}
			for _, l := range m.open {
				l.Release()
			}
			delete(models, name)
		case op == 3 && m != nil:
			// Look up and open the next batch, if it exists yet.
			cctx, cancel := context.WithCancel(ctx)
			cancel() // never block: the model knows whether it exists
			ref, err := s.Lookup(cctx, name, m.next, CallerID(len(name)))
			want := m.base + m.next
			switch {
			case err == nil:
				if ref.Seq != want {
					t.Fatalf("step %d: %s/%d is seq %d, want %d", step, name, m.next, ref.Seq, want)
				}
				l, err := s.Open(ref.Seq, CallerID(len(name)))
				if err != nil {
					t.Fatalf("step %d open: %v", step, err)
				}
				m.open = append(m.open, l)
				m.next++
			case errors.Is(err, ErrInterrupted):
				if int(want) < published {
					t.Fatalf("step %d: %s/%d would block but seq %d is published", step, name, m.next, want)
				}
			case errors.Is(err, ErrNotFound):
				if published != total || int(want) < total {
					t.Fatalf("step %d: %s/%d not found before the end: %v", step, name, m.next, err)
				}
			default:
				t.Fatalf("step %d lookup: %v", step, err)
			}
		case op == 4 && m != nil && len(m.open) > 0:
			i := rng.IntN(len(m.open))
			m.open[i].Release()
			m.open = append(m.open[:i], m.open[i+1:]...)
		case op == 5 && m != nil:
			// Unlink the next batch without reading it.
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := s.Lookup(cctx, name, m.next, 99); err == nil {
				if err := s.Unlink(name, m.next); err != nil {
					t.Fatalf("step %d unlink: %v", step, err)
				}
				m.next++
			}
		}
		checkInvariants(t, step, s, blobs, models, limit)
	}
}

func checkInvariants(t *testing.T, step int, s *Store, blobs map[uint64]*fakeBlob, models map[string]*model, limit int64) {
	t.Helper()
	snap := s.Snapshot()
	if snap.Used+snap.Reserved > limit {
		t.Fatalf("step %d: used %d + reserved %d > limit %d", step, snap.Used, snap.Reserved, limit)
	}
	var live int64
	for seq, b := range blobs {
		switch n := b.freed.Load(); {
		case n > 1:
			t.Fatalf("step %d: batch %d freed %d times", step, seq, n)
		case n == 0:
			live += b.size
		}
	}
	if live != snap.Used {
		t.Fatalf("step %d: live blobs %d bytes, store says %d", step, live, snap.Used)
	}
	for name, m := range models {
		for _, l := range m.open {
			if l.b.blob.(*fakeBlob).freed.Load() != 0 {
				t.Fatalf("step %d: %s holds a lease on freed batch %d", step, name, l.Seq())
			}
		}
		// Every batch it has not looked up yet must still be held.
		for seq := m.base + m.next; seq < uint64(len(blobs)); seq++ {
			if blobs[seq].freed.Load() != 0 {
				t.Fatalf("step %d: batch %d freed before %s read it", step, seq, name)
			}
		}
	}
}
