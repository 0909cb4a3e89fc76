package batchstore

import (
	"fmt"
	"sort"
)

// A consumer is undecided from its join until it sets a subset or reads:
// until then it holds no plan back (a trial does mkdir, then writes its
// subset; the few milliseconds between must not make the producer plan
// for all of the data). Once decided it is settled: placed where its
// subset can be read exactly and its first batch fits the buffer.

// drop is an order position the producer passed over because no decided
// consumer reading its epoch wanted the sample there.
type drop struct{ pos, index int32 }

// Wants says whether the producer makes the sample index at order position
// pos of epoch e: some decided consumer that reads e wants it, or none is
// decided (a mount fills its buffer before anyone joins). A sample passed
// over is recorded: a consumer whose subset holds it is not placed where
// it would have read it.
func (s *Store) Wants(e, pos, index int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deciding = true
	m := s.mark(e)
	m.decided = max(m.decided, pos+1)
	w, some := s.wantCache(e)
	if !some || w == nil || w.Has(index) {
		return true
	}
	m.drops = append(m.drops, drop{int32(pos), int32(index)})
	return false
}

// samplesBefore is how many of epoch m's samples lie before its order
// position pos: the positions the producer did not pass over. A split's
// boundary is an order position; the samples published before it are
// fewer by what was passed over, which may be anyone's samples (another
// consumer left after the plan). Known once Wants has ruled on every
// position below pos; a producer that never asks Wants (an outside one)
// passes over nothing. Callers hold s.mu.
func (s *Store) samplesBefore(m *epochMark, pos int) (int, bool) {
	if s.deciding && m.decided < pos {
		return 0, false
	}
	passed := sort.Search(len(m.drops), func(k int) bool { return int(m.drops[k].pos) >= pos })
	return pos - passed, true
}

// wantCache is wantedIn(e), kept until the consumers' wants change: the
// producer asks for every sample. Callers hold s.mu.
func (s *Store) wantCache(e int) (*Subset, bool) {
	k := &s.wants
	if !k.valid || k.epoch != e || k.gen != s.wantGen {
		k.sub, k.some = s.wantedIn(e)
		k.epoch, k.gen, k.valid = e, s.wantGen, true
	}
	return k.sub, k.some
}

// wantsChanged says a consumer joined, left, decided, moved or changed
// its subset. Callers hold s.mu.
func (s *Store) wantsChanged() { s.wantGen++ }

// wantedIn is what the decided consumers that read producer epoch e want
// together (nil: everything; empty: nothing), and whether any consumer
// still reading is decided at all: while none is, everything is made (a
// mount fills its buffer before anyone joins, and again once all have
// read their epochs). Callers hold s.mu.
func (s *Store) wantedIn(e int) (*Subset, bool) {
	return s.wantedBy(func(c *consumer) bool { return c.joinEpoch <= e })
}

// holdsBack: c is decided, active and not past its last epoch, so what
// it wants is made. Callers hold s.mu.
func (s *Store) holdsBack(c *consumer) bool {
	return c.decided && c.active() && !s.pastTheEnd(c, c.low)
}

// wantedBy is what the consumers that hold back and that in picks want
// together, now and from their next epochs (nil: everything; empty:
// nothing), and whether any consumer holds back at all. Callers hold
// s.mu.
func (s *Store) wantedBy(in func(*consumer) bool) (*Subset, bool) {
	u := &Subset{form: "none"}
	some := false
	for _, c := range s.consumers {
		if !s.holdsBack(c) {
			continue
		}
		some = true
		if !in(c) {
			continue
		}
		if u = union(u, c.wants()); u == nil {
			return nil, true
		}
	}
	return u, some
}

// settle places c, which has not read yet, where it can read its subset
// exactly and its first batch fits: as if it joined now (at the oldest
// batch held), else at the newest published batch (a split: the rest of
// this epoch then the part it missed), else at the start of the next
// producer epoch not planned yet, which will hold what it wants. The
// earliest that works wins. Callers hold s.mu.
func (s *Store) settle(c *consumer) {
	// A listing (Pending) may have computed batches where c was placed
	// before: they are not where it starts now.
	c.batches = batchList{}
	s.wantsChanged()
	delete(s.splits, c.id)
	s.place(c)
	if s.readable(c) {
		s.passBefore(c)
		return
	}
	delete(s.splits, c.id)
	if e, ok := s.head(); ok && !s.cfg.JoinAtEpoch && !s.cfg.Unordered {
		m := s.epochs[e]
		s.placeSplit(c, e, m.outputSoFar, m.lastEndPos, s.samples)
		if s.readable(c) {
			s.passBefore(c)
			return
		}
		delete(s.splits, c.id)
	}
	s.placeAligned(c, s.planned+1)
	s.passBefore(c)
}

// head is the producer epoch being published, if one is under way that
// a consumer can still join in.
func (s *Store) head() (int, bool) {
	e := s.currentEpoch()
	m := s.epochs[e]
	if m == nil || !m.started || m.ended || e > s.planned {
		return 0, false
	}
	return e, true
}

// readable: every producer epoch c would read that is planned holds all
// of its subset (no plan left it out, no sample of it was passed over
// after c's start), and its first batch fits the buffer. Callers hold
// s.mu.
func (s *Store) readable(c *consumer) bool {
	from := 0
	if c.splitID != 0 {
		if sp := s.splits[c.id]; sp != nil {
			from = sp.pos
		}
	}
	for e := c.joinEpoch; e <= s.planned; e++ {
		m := s.epochs[e]
		if m == nil {
			continue
		}
		if !c.subset.within(m.wanted) {
			return false
		}
		for _, d := range m.drops {
			if (e > c.joinEpoch || int(d.pos) >= from) && c.subset.Has(int(d.index)) {
				return false
			}
		}
	}
	return s.firstBatchFits(c)
}

// passBefore marks what c starts after as passed: batches kept for the
// first joiner may go. Callers hold s.mu.
func (s *Store) passBefore(c *consumer) {
	for _, b := range s.held {
		if (c.startKnown && b.end() <= c.start) || (!c.startKnown && b.info.Epoch < c.joinEpoch) {
			b.passed = true
		}
	}
	s.freeWhatWeCan()
}

// capacity is how many full producer batches the buffer holds; 0 where
// that is not known yet.
func (s *Store) capacity() int64 {
	if full := s.fullBatchBytes(); full > 0 {
		return s.cfg.Limit / full
	}
	return 0
}

// spans estimates how many producer batches a batch of size samples of
// sub spans in a stream of wanted samples: they are held together until
// it is read. Two more for where its samples fall.
func (s *Store) spans(size int, sub *Subset, wanted int) int64 {
	if sub == nil || sub.Len() == 0 {
		return int64(size)/int64(max(s.cfg.BatchSize, 1)) + 2
	}
	return int64(size)*int64(max(wanted, 1))/int64(sub.Len())/int64(max(s.cfg.BatchSize, 1)) + 2
}

// firstBatchFits: c's first batch, counted through what is held from its
// start and estimated past it, spans no more producer batches than the
// buffer holds. Callers hold s.mu.
func (s *Store) firstBatchFits(c *consumer) bool {
	capacity := s.capacity()
	if c.subset == nil || capacity == 0 {
		return true
	}
	found, walked := 0, int64(0)
	if c.startKnown {
		for _, seq := range s.heldSeqs() {
			b := s.held[seq]
			if b.end() <= c.start || len(b.info.Indices) != b.info.Samples {
				continue
			}
			walked++
			for i, x := range b.info.Indices {
				if b.first+uint64(i) >= c.start && c.subset.Has(int(x)) {
					found++
				}
			}
			if found >= c.batchSize {
				return walked <= capacity
			}
		}
	}
	w, some := s.wantedIn(c.joinEpoch)
	if !some {
		w = nil // all is made
	}
	return walked+s.spans(c.batchSize-found, c.subset, s.sizeOf(union(w, c.subset))) <= capacity
}

// sizeOf is how many samples sub holds; all of them for nil.
func (s *Store) sizeOf(sub *Subset) int {
	if sub == nil {
		return s.cfg.Samples
	}
	return sub.Len()
}

// combinedNeed refuses to let c read sub when a batch of some decided
// consumer (c included) would then span more producer batches than the
// buffer holds: what all of them want together is what the producer
// makes. Callers hold s.mu.
func (s *Store) combinedNeed(c *consumer, sub *Subset) error {
	capacity := s.capacity()
	if capacity == 0 {
		return nil
	}
	others, some := s.wantedBy(func(o *consumer) bool { return o != c })
	all := sub
	if some {
		all = union(others, sub)
	}
	wanted := s.sizeOf(all)
	if n := s.spans(c.batchSize, sub, wanted); sub != nil && n > capacity {
		return fmt.Errorf("%d samples of the %d wanted: a batch of %d of them spans about %d producer batches, and the buffer holds %d (raise --buffer, lower batch_size or widen the subset)",
			s.sizeOf(sub), wanted, c.batchSize, n, capacity)
	}
	for _, o := range s.consumers {
		if o == c || o.subset == nil || !s.holdsBack(o) {
			continue
		}
		if n := s.spans(o.batchSize, o.subset, wanted); n > capacity {
			return fmt.Errorf("%d samples wanted with it: a batch of %d of %s's %d would span about %d producer batches, and the buffer holds %d (raise --buffer, or narrow this one's subset)",
				wanted, o.batchSize, o.name, o.subset.Len(), n, capacity)
		}
	}
	return nil
}
