package batchstore

import "github.com/tsock/tsock/batchstore/internal/plan"

// The views the planner (package plan) reads the store's state through,
// for one call, under Store.mu: the store's stream (a plan.Stream: the
// Store itself under another type, so that these questions, asked with
// the lock held, are no methods a caller of the Store could call without
// it); a consumer, a plan.Reader.

// stream is the Store as the planner reads it.
type stream Store

var _ plan.Stream = (*stream)(nil)

// stream is s's plan.Stream. Callers hold Store.mu.
func (s *Store) stream() *stream { return (*stream)(s) }

// EpochStart implements plan.Stream. Callers hold Store.mu.
func (s *stream) EpochStart(e int) (uint64, bool) {
	m := s.dem.epochs[e]
	if m == nil || !m.started {
		return 0, false
	}
	return m.start, true
}

// SplitEnd implements plan.Stream: where split's epochs end in producer
// epoch e, the samples before its boundary less what the producer passed
// over. Callers hold Store.mu.
func (s *stream) SplitEnd(e, split int) (uint64, bool) {
	m := s.dem.epochs[e]
	if m == nil || !m.started {
		return 0, false
	}
	pos, ok := m.boundaries[split]
	if !ok {
		return 0, false
	}
	n, ok := s.dem.samplesBefore(m, pos)
	if !ok {
		return 0, false
	}
	return m.start + uint64(n), true
}

// Published implements plan.Stream. Callers hold Store.mu.
func (s *stream) Published() uint64 { return s.buf.published() }

// HeldAt implements plan.Stream. Callers hold Store.mu.
func (s *stream) HeldAt(x uint64) (first, end uint64, indices []int32, ok bool) {
	b := s.buf.batchAt(x)
	if b == nil {
		return 0, 0, nil, false
	}
	return b.first, b.end(), b.info.Indices, true
}

// NextHeld implements plan.Stream. Callers hold Store.mu.
func (s *stream) NextHeld(x, limit uint64) uint64 { return s.buf.nextHeld(x, limit) }

// Epochs implements plan.Stream.
func (s *stream) Epochs() int { return s.cfg.Epochs }

// markView is producer epoch e's mark as placement reads it. Callers hold
// Store.mu.
func (dm *demand) markView(e int) (plan.Mark, bool) {
	m := dm.epochs[e]
	if m == nil {
		return plan.Mark{}, false
	}
	return plan.Mark{Start: m.start, Started: m.started, Ended: m.ended, OutputSoFar: m.outputSoFar, LastEndPos: m.lastEndPos}, true
}

// reader is c as the planner reads it. Callers hold Store.mu.
func (ro *roster) reader(c *consumer) plan.Reader {
	return plan.Reader{JoinEpoch: c.joinEpoch, Split: c.splitID, BatchSize: c.batchSize, Subsets: c, AllowShort: c.allowShort,
		Progress: plan.Progress{Active: c.active(), Start: c.start, StartKnown: c.startKnown, Low: c.low, Batches: &c.batches, Samples: ro.s.cfg.Samples}}
}

// SubsetFor implements plan.Subsets: c's subset for its epoch k, nil
// (not a nil *Subset in an interface) where it reads everything.
func (c *consumer) SubsetFor(k int) plan.Subset {
	if sub := c.subsetFor(k); sub != nil {
		return sub
	}
	return nil
}
