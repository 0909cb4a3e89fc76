package batchstore

import (
	"sort"

	"github.com/tsock/tsock/batchstore/internal/plan"
)

// A consumer is undecided from its join until it sets a subset or reads:
// until then it holds no epoch's order back (a trial does mkdir, then writes its
// subset; the few milliseconds between must not make the producer order
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
	s.dem.deciding = true
	m := s.dem.mark(e)
	m.decided = max(m.decided, pos+1)
	w, some := s.dem.wantCache(e)
	if !some {
		w = s.universe
	}
	if w.Has(index) {
		return true
	}
	m.drops = append(m.drops, drop{int32(pos), int32(index)})
	return false
}

// samplesBefore is how many of epoch m's samples lie before its order
// position pos: the positions the producer did not pass over. A split's
// boundary is an order position; the samples published before it are
// fewer by what was passed over, which may be anyone's samples (another
// consumer left after the order was fixed). Known once Wants has ruled on every
// position below pos; a producer that never asks Wants (an outside one)
// passes over nothing. callers hold Store.mu.
func (dm *demand) samplesBefore(m *epochMark, pos int) (int, bool) {
	if dm.deciding && m.decided < pos {
		return 0, false
	}
	passed := sort.Search(len(m.drops), func(k int) bool { return int(m.drops[k].pos) >= pos })
	return pos - passed, true
}

// wantCache is wantedIn(e), kept until the consumers' wants change: the
// producer asks for every sample. callers hold Store.mu.
func (dm *demand) wantCache(e int) (*Subset, bool) {
	k := &dm.wants
	if !k.valid || k.epoch != e || k.gen != dm.wantGen {
		k.sub, k.some = dm.wantedIn(e)
		k.epoch, k.gen, k.valid = e, dm.wantGen, true
	}
	return k.sub, k.some
}

// wantsChanged says a consumer joined, left, decided, moved or changed
// its subset. callers hold Store.mu.
func (dm *demand) wantsChanged() { dm.wantGen++ }

// wantedIn is what the decided consumers that read producer epoch e want
// together (nil: everything; empty: nothing), and whether any consumer
// still reading is decided at all: while none is, everything is made (a
// mount fills its buffer before anyone joins, and again once all have
// read their epochs). callers hold Store.mu.
func (dm *demand) wantedIn(e int) (*Subset, bool) {
	return dm.wantedBy(func(c *consumer) bool { return c.joinEpoch <= e })
}

// holdsBack: c is decided, active and not past its last epoch, so what
// it wants is made. callers hold Store.mu.
func (dm *demand) holdsBack(c *consumer) bool {
	s := dm.s
	return c.decided && c.active() && !s.ros.pastTheEnd(c, c.low)
}

// wantedBy is what the consumers that hold back and that in picks want
// together, now and from their next epochs (nil: everything; empty:
// nothing), and whether any consumer holds back at all. Callers hold
// s.mu.
func (dm *demand) wantedBy(in func(*consumer) bool) (*Subset, bool) {
	s := dm.s
	u := &Subset{form: "none"}
	some := false
	for c := range s.ros.all() {
		if !dm.holdsBack(c) {
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
// producer epoch not ordered yet, which will hold what it wants. The
// earliest that works wins. callers hold Store.mu.
func (dm *demand) settle(c *consumer) {
	s := dm.s
	// A listing (Pending) may have computed batches where c was placed
	// before: they are not where it starts now.
	c.batches = plan.BatchList{}
	dm.wantsChanged()
	s.ros.dropSplit(c)
	s.ros.place(c)
	if dm.readable(c) {
		dm.passBefore(c)
		return
	}
	s.ros.dropSplit(c)
	if e, ok := dm.head(); ok && !s.cfg.JoinAtEpoch && !s.cfg.Unordered {
		m, _ := dm.markView(e)
		s.ros.apply(c, plan.SplitAt(e, m, s.buf.published()))
		if dm.readable(c) {
			dm.passBefore(c)
			return
		}
		s.ros.dropSplit(c)
	}
	s.ros.apply(c, plan.Aligned(dm.markView, dm.ordered+1))
	dm.passBefore(c)
}

// head is the producer epoch being published, if one is under way that
// a consumer can still join in.
func (dm *demand) head() (int, bool) {
	e := dm.newest()
	m := dm.epochs[e]
	if m == nil || !m.started || m.ended || e > dm.ordered {
		return 0, false
	}
	return e, true
}

// readable: every producer epoch c would read that is ordered holds all
// of its subset (no epoch's order left it out, no sample of it was passed over
// after c's start), and its first batch fits the buffer. Callers hold
// s.mu.
func (dm *demand) readable(c *consumer) bool {
	s := dm.s
	from := 0
	if c.splitID != 0 {
		if sp := s.ros.splitOf(c); sp != nil {
			from = sp.pos
		}
	}
	for e := c.joinEpoch; e <= dm.ordered; e++ {
		m := dm.epochs[e]
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
	return dm.firstBatchFits(c)
}

// passBefore marks what c starts after as passed: batches kept for the
// first joiner may go. callers hold Store.mu.
func (dm *demand) passBefore(c *consumer) {
	s := dm.s
	for b := range s.buf.batches() {
		if (c.startKnown && b.end() <= c.start) || (!c.startKnown && b.info.Epoch < c.joinEpoch) {
			b.passed = true
		}
	}
	s.buf.freeWhatWeCan()
}

// capacity is how many full producer batches the buffer holds; 0 where
// that is not known yet.
func (bf *buffer) capacity() int64 {
	s := bf.s
	if full := bf.fullBatchBytes(); full > 0 {
		return s.cfg.Limit / full
	}
	return 0
}

// spans is plan.Spans of a batch of size samples of sub (nil:
// everything) in a stream of wanted samples. Callers hold Store.mu.
func (dm *demand) spans(size int, sub *Subset, wanted int) int64 {
	return plan.Spans(size, sub.Len(), wanted, dm.s.cfg.BatchSize)
}

// firstBatchFits: c's first batch, counted through what is held from its
// start and estimated past it, spans no more producer batches than the
// buffer holds. callers hold Store.mu.
func (dm *demand) firstBatchFits(c *consumer) bool {
	s := dm.s
	capacity := s.buf.capacity()
	if c.subset == nil || capacity == 0 {
		return true
	}
	found, walked := 0, int64(0)
	if c.startKnown {
		for _, seq := range s.buf.heldSeqs() {
			b := s.buf.batch(seq)
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
	w, some := dm.wantedIn(c.joinEpoch)
	if !some {
		w = s.universe // what is made
	}
	return walked+dm.spans(c.batchSize-found, c.subset, dm.sizeOf(union(w, c.subset))) <= capacity
}

// sizeOf is how many samples sub holds; all of them for nil.
func (dm *demand) sizeOf(sub *Subset) int {
	s := dm.s
	if sub == nil {
		return s.cfg.Samples
	}
	return sub.Len()
}

// combinedNeed refuses to let c read sub when a batch of some decided
// consumer (c included) would then span more producer batches than the
// buffer holds: what all of them want together is what the producer
// makes (plan.Admit decides). callers hold Store.mu.
func (dm *demand) combinedNeed(c *consumer, sub *Subset) error {
	s := dm.s
	capacity := s.buf.capacity()
	if capacity == 0 {
		return nil
	}
	others, some := dm.wantedBy(func(o *consumer) bool { return o != c })
	all := sub
	if some {
		all = union(others, sub)
	}
	var holding []plan.Want
	for o := range s.ros.all() {
		if o != c && o.subset != nil && dm.holdsBack(o) {
			holding = append(holding, plan.Want{Name: o.name, BatchSize: o.batchSize, Subset: true, SubsetLen: o.subset.Len()})
		}
	}
	sort.Slice(holding, func(a, b int) bool { return holding[a].Name < holding[b].Name }) // the same refusal whatever the map's order
	joiner := plan.Want{Name: c.name, BatchSize: c.batchSize, Subset: sub != nil, SubsetLen: sub.Len()}
	return plan.Admit(joiner, dm.sizeOf(all), holding, capacity, s.cfg.BatchSize)
}
