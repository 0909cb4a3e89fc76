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
	next   uint64 // next batch number it will look up
	sample uint64 // the first sample of that batch
	size   int
	open   []*Lease
	// offset is 0 when it joined at an epoch's start, its join position
	// when it joined mid-epoch (producer epoch joinEpoch): the producer's
	// plan puts the samples it missed first in the next epoch, so its
	// first epoch ends at offset in that one; its later epochs are whole
	// producer epochs from the one after.
	offset    uint64
	joinEpoch int
}

// firstEnd is where a mid-epoch joiner's first epoch ends.
func (m *model) firstEnd() uint64 { return uint64(m.joinEpoch+1)*epochLen + m.offset }

// skip moves past the rest of the producer epoch its first epoch ended in.
func (m *model) skip() {
	if m.offset > 0 && m.sample == m.firstEnd() {
		m.sample = uint64(m.joinEpoch+2) * epochLen
	}
}

// epochLen is the samples of each producer epoch in the random model.
const epochLen = 11 // prime: batches of every size end short at epoch ends

// epochEnd is the end (a global sample) of m's own epoch holding sample x.
func (m *model) epochEnd(x uint64) uint64 {
	if m.offset > 0 && x < m.firstEnd() {
		return m.firstEnd()
	}
	return (x/epochLen + 1) * epochLen
}

// want is the samples of m's next batch: its batch size, or what is left
// of its epoch.
func (m *model) want() uint64 {
	return min(uint64(m.size), m.epochEnd(m.sample)-m.sample)
}

// TestRandomSchedules drives the store through random interleavings of
// publish (batches of 1–3 samples, epochs of 11 samples, each ordered as
// the producer does), join (with batch sizes 1–4, at any point of an
// epoch), leave, lookup, open, release and unlink, and checks after every
// step: the buffer is never over its limit, no blob is freed while a
// lease or a consumer still needs it, none twice, and each consumer's
// batches are consecutive runs of samples with no gap and no repeat,
// never straddling one of its own epochs' ends and short only there.
func TestRandomSchedules(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runSchedule(t, seed) })
	}
}

func runSchedule(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	const limit = 100
	s := New(Config{Limit: limit, BatchSize: 2, SizeOf: func(n int) int64 { return int64(10 * n) }})
	var blobs []*fakeBlob
	var firsts []uint64 // first sample of each published batch
	var samples uint64
	models := map[string]*model{}
	names := []string{"a", "b", "c", "d"}
	ctx := context.Background()
	for step := 0; step < 1500; step++ {
		name := names[rng.IntN(len(names))]
		m := models[name]
		switch op := rng.IntN(7); {
		case op == 0 && len(blobs) < 60:
			pos := int(samples % epochLen) // within the producer's epoch
			n := min(1+rng.IntN(3), epochLen-pos)
			size := int64(10 * n)
			snap := s.Snapshot()
			if snap.Used+snap.Reserved+size > limit {
				continue // would block: that is tested elsewhere
			}
			r, err := s.Reserve(ctx, size)
			if err != nil {
				t.Fatalf("step %d reserve: %v", step, err)
			}
			epoch := int(samples / epochLen)
			if pos == 0 { // the producer's plan: each split's end stays where it was
				s.FixOrder(epoch, func(in map[int]int, _ func(int) bool) map[int]int { return in })
			}
			blob := &fakeBlob{size: size}
			idx := len(blobs)
			info := Info{Epoch: epoch, Index: idx, Samples: n, FirstPos: pos, EndPos: pos + n, Last: pos+n == epochLen}
			if _, err := r.Publish(blob, info); err != nil {
				t.Fatal(err)
			}
			blobs, firsts = append(blobs, blob), append(firsts, samples)
			samples += uint64(n)
		case op == 1 && m == nil:
			mustJoin(t, s, name)
			size := 1 + rng.IntN(4)
			if err := s.SetBatchSize(name, size); err != nil {
				t.Fatal(err)
			}
			c := s.ros.consumers[name]
			models[name] = &model{size: size, sample: c.start, offset: uint64(c.joinPos), joinEpoch: c.joinEpoch}
			if !c.startKnown {
				models[name].sample = samples
			}
		case op == 2 && m != nil && rng.IntN(5) == 0:
			if err := s.Leave(name); err != nil {
				t.Fatal(err)
			}
			for _, l := range m.open {
				l.Release()
			}
			delete(models, name)
		case (op == 3 || op == 5) && m != nil:
			cctx, cancel := context.WithCancel(ctx)
			cancel() // never block: the model knows whether it is there
			ref, err := s.Lookup(cctx, name, m.next, CallerID(len(name)))
			if errors.Is(err, ErrInterrupted) {
				if m.sample+m.want() <= samples {
					t.Fatalf("step %d: %s/%d would block with its samples published", step, name, m.next)
				}
				continue
			}
			if err != nil {
				t.Fatalf("step %d lookup %s/%d: %v", step, name, m.next, err)
			}
			checkPieces(t, step, ref, m, firsts)
			m.sample += uint64(ref.Samples)
			m.skip()
			if op == 5 {
				if err := s.Unlink(name, m.next); err != nil {
					t.Fatalf("step %d unlink: %v", step, err)
				}
			} else {
				l, err := open(s, name, ref, CallerID(len(name)))
				if err != nil {
					t.Fatalf("step %d open: %v", step, err)
				}
				m.open = append(m.open, l)
			}
			m.next++
		case op == 4 && m != nil && len(m.open) > 0:
			i := rng.IntN(len(m.open))
			m.open[i].Release()
			m.open = append(m.open[:i], m.open[i+1:]...)
		}
		checkInvariants(t, step, s, blobs, firsts, models, limit)
	}
}

// checkPieces: the batch is m.size samples, or what is left of its
// epoch, from m.sample on, without gaps.
func checkPieces(t *testing.T, step int, ref Ref, m *model, firsts []uint64) {
	t.Helper()
	if uint64(ref.Samples) != m.want() {
		t.Fatalf("step %d: batch from sample %d of %d samples, want %d (batch size %d, its epoch ends at %d)",
			step, m.sample, ref.Samples, m.want(), m.size, m.epochEnd(m.sample))
	}
	x := m.sample
	for _, p := range ref.Pieces {
		if got := firsts[p.Seq] + uint64(p.From); got != x {
			t.Fatalf("step %d: piece starts at sample %d, want %d", step, got, x)
		}
		x += uint64(p.To - p.From)
	}
	if x != m.sample+uint64(ref.Samples) {
		t.Fatalf("step %d: pieces cover %d samples, batch says %d", step, x-m.sample, ref.Samples)
	}
}

func checkInvariants(t *testing.T, step int, s *Store, blobs []*fakeBlob, firsts []uint64, models map[string]*model, limit int64) {
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
			for _, b := range l.batches {
				if b.blob.(*fakeBlob).freed.Load() != 0 {
					t.Fatalf("step %d: %s holds a lease on freed batch %d", step, name, b.seq)
				}
			}
		}
		// Every published sample it has not looked up yet must be held.
		for seq, first := range firsts {
			end := first + uint64(blobs[seq].size/10)
			if end > m.sample && blobs[seq].freed.Load() != 0 {
				t.Fatalf("step %d: batch %d freed before %s read it (at sample %d)", step, seq, name, m.sample)
			}
		}
	}
}
