package batchstore

import (
	"context"
	"fmt"

	"github.com/tsock/tsock/batchstore/internal/plan"
)

// demand is the producer epochs' orders and what the decided consumers
// want of them. Guarded by Store.mu.
type demand struct {
	s        *Store
	epochs   map[int]*epochMark
	ordered  int    // the latest producer epoch whose order is fixed, -1 before any
	deciding bool   // the producer asks Wants of each position (the built-in one does)
	wantGen  uint64 // bumped when the consumers' wants change (settle.go)
	wants    wantsCache
}

// epochMark is what the store knows of one producer epoch.
type epochMark struct {
	start, end  uint64      // global sample numbers; end valid once ended
	started     bool        // start is known
	ended       bool        // its last batch is published
	boundaries  map[int]int // split id → output position in this epoch
	outputSoFar int         // samples of it published so far
	lastEndPos  int         // order position after its last published batch
	// wanted is what the consumers' subsets held when it was ordered:
	// its order holds no other sample (nil: it holds all).
	wanted *Subset
	// drops are the positions the producer passed over since no decided
	// consumer reading the epoch wanted their samples (Wants), in order;
	// decided is the position below which Wants has ruled on every one.
	drops   []drop
	decided int
}

func (m *epochMark) boundaryOf(id int) (int, bool) {
	if m == nil {
		return 0, false
	}
	pos, ok := m.boundaries[id]
	return pos, ok
}

// wantsCache is what the decided consumers of one epoch want, as of
// wantGen.
type wantsCache struct {
	valid bool
	epoch int
	gen   uint64
	sub   *Subset
	some  bool
}

// OrderFunc orders one producer epoch. splits maps each live split to its
// order position in the previous epoch; wanted says which dataset
// indices some consumer's subset holds (every one with a nil subset). It
// returns each split's output position in the new one.
type OrderFunc func(splits map[int]int, wanted func(index int) bool) map[int]int

// FixOrder fixes epoch e's order with order, atomically with joins: a
// consumer that joins mid-epoch e-1 either is in splits, or joins after
// and starts in epoch e.
func (s *Store) FixOrder(e int, order OrderFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A split binds the one epoch after the one it was made in: the
	// joiner's first epoch ends there, and its later ones are whole
	// producer epochs, so no order keeps a piece of an earlier one.
	in := map[int]int{}
	for id, sp := range s.ros.splits {
		if sp.epoch == e-1 {
			in[id] = sp.pos
		}
	}
	wanted := s.dem.wanted()
	out := order(in, wanted.Has)
	m := s.dem.mark(e)
	m.wanted = wanted
	for id, pos := range out {
		m.boundaries[id] = pos
		delete(s.ros.splits, id) // ordered: it binds no later epoch
	}
	s.dem.ordered = e
	s.broadcast()
}

// EndEpoch says epoch e is over though its last batch was published
// without saying so (its last samples were skipped).
func (s *Store) EndEpoch(e int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dem.endEpoch(e)
	s.broadcast()
}

// endEpoch: the next epoch starts where e ends. An epoch that ends with
// no sample published, none passed over for want of a consumer, had
// every sample of the dataset skipped (each epoch's order holds every
// sample not known bad): nothing can be made again, and waiters get
// ErrNoSamples instead of waiting forever.
// Callers hold Store.mu.
func (dm *demand) endEpoch(e int) {
	s := dm.s
	m := dm.mark(e)
	if m.outputSoFar == 0 && len(m.drops) == 0 && s.failure == nil {
		s.failure = fmt.Errorf("producer epoch %d ended with none: %w", e, ErrNoSamples)
	}
	m.end, m.ended = s.buf.published(), true
	if !m.started {
		m.start, m.started = s.buf.published(), true
	}
	next := dm.mark(e + 1)
	next.start, next.started = s.buf.published(), true
}

// mark returns epoch e's mark, creating it. callers hold Store.mu.
func (dm *demand) mark(e int) *epochMark {
	m := dm.epochs[e]
	if m == nil {
		m = &epochMark{boundaries: map[int]int{}}
		dm.epochs[e] = m
		dm.pruneEpochs()
	}
	return m
}

// lastOrdered is the latest producer epoch whose order is fixed, -1
// before any. Callers hold Store.mu.
func (dm *demand) lastOrdered() int { return dm.ordered }

// newest is the newest producer epoch that has a mark. Callers hold
// Store.mu.
func (dm *demand) newest() int {
	e := 0
	for k := range dm.epochs {
		e = max(e, k)
	}
	return e
}

// pruneEpochs forgets the marks of epochs nothing can ask about again,
// so that an endless run (Config.Epochs 0) keeps a few: those before the newest but
// one, before every held batch's, and before the epoch that each active
// consumer reads in. callers hold Store.mu.
func (dm *demand) pruneEpochs() {
	s := dm.s
	keep := max(dm.ordered, dm.newest()) - 1
	for b := range s.buf.batches() {
		keep = min(keep, b.info.Epoch)
	}
	for c := range s.ros.all() {
		if !c.active() {
			continue
		}
		e := c.joinEpoch
		if last, ok := c.batches.Last(); ok {
			e += last.Epoch
		}
		keep = min(keep, e)
	}
	for e := range dm.epochs {
		if e < keep {
			delete(dm.epochs, e)
		}
	}
}

// wanted is what the active, decided consumers' subsets hold together,
// now and from their next epochs; nil (everything) if one has none; the
// universe (everything, or this node's share) if none is decided. callers hold Store.mu.
func (dm *demand) wanted() *Subset {
	u, some := dm.wantedBy(func(*consumer) bool { return true })
	if !some {
		return dm.s.universe
	}
	return u
}

// WaitNeed blocks until some consumer needs the sample at order position
// pos of producer epoch e: the producer makes only what will be read.
func (s *Store) WaitNeed(ctx context.Context, e, pos int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.dem.needed(e, pos) || s.failure != nil {
		switch {
		case s.failure != nil:
			return s.failure
		case s.closed:
			return ErrClosed
		}
		s.buf.setIdle(true)
		err := s.wait(ctx)
		s.buf.setIdle(false)
		if err != nil {
			return err
		}
	}
	return nil
}

// Needs says whether some consumer needs producer epoch e now (its first
// sample): past Config.Epochs, only a late joiner's epochs reach there.
func (s *Store) Needs(e int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dem.needed(e, 0)
}

// needed: epochs before Config.Epochs are made for whoever joins; later
// ones only as far as a late joiner's last epoch reaches. callers hold Store.mu.
func (dm *demand) needed(e, pos int) bool {
	return pos < dm.needBound(e, pos+1)
}

// NeedUpTo blocks until some consumer needs order position from of
// producer epoch e, then returns the end of the run of positions from
// there that are needed now (at most epochLen): what an outside producer
// should make next.
func (s *Store) NeedUpTo(ctx context.Context, e, from, epochLen int) (int, error) {
	if err := s.WaitNeed(ctx, e, from); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return min(s.dem.needBound(e, epochLen), epochLen), nil
}

// needBound is the first position of epoch e (of epochLen) that no
// consumer needs now (plan.NeedBound decides). Callers hold Store.mu.
func (dm *demand) needBound(e, epochLen int) int {
	s := dm.s
	readers := func(yield func(plan.Joined) bool) {
		for c := range s.ros.all() {
			if c.active() && !yield(plan.Joined{JoinEpoch: c.joinEpoch, Split: c.splitID}) {
				return
			}
		}
	}
	return plan.NeedBound(e, epochLen, s.cfg.Epochs, s.cfg.BatchSize, readers, func(e, split int) (int, bool) {
		return dm.epochs[e].boundaryOf(split)
	})
}
