package batchstore

import (
	"context"
	"fmt"
	"time"
)

// Reservation is room in the buffer promised to one batch being written.
type Reservation struct {
	s    *Store
	size int64
	done bool
}

// Reserve blocks until size more bytes fit in the buffer, then holds them
// for the caller. The producer reserves before it allocates, so memory
// never exceeds the limit, even while a batch is being written.
func (s *Store) Reserve(ctx context.Context, size int64) (*Reservation, error) {
	if size > s.cfg.Limit {
		return nil, fmt.Errorf("reserve %d bytes of a %d-byte buffer: %w", size, s.cfg.Limit, ErrTooLarge)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var began time.Time
	defer func() {
		if !began.IsZero() {
			s.stats.producerWaiting, s.stats.lingerBlocked = false, false
			s.stats.producerWait += time.Since(began)
			s.endMappedDeadlocks()
		}
	}()
	for !s.fits(size) {
		if s.closed {
			return nil, ErrClosed
		}
		if began.IsZero() {
			began = time.Now()
			s.stats.producerWaits++
			s.stats.producerWaiting = true
		}
		s.stats.lingerBlocked = s.used+s.reserved+size <= s.cfg.Limit
		s.stats.waitingFor = size
		if err := s.waitOrPoll(ctx); err != nil {
			return nil, err
		}
	}
	if s.closed {
		return nil, ErrClosed
	}
	s.reserved += size
	return &Reservation{s: s, size: size}, nil
}

// Grow makes the reservation size bytes, waiting for room for the
// difference (an ingested batch whose size is known only once written).
func (r *Reservation) Grow(ctx context.Context, size int64) error {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for !r.done && size > r.size && !s.fits(size-r.size) {
		if s.closed {
			return ErrClosed
		}
		if err := s.waitOrPoll(ctx); err != nil {
			return err
		}
	}
	if r.done {
		return fmt.Errorf("grow: reservation already used")
	}
	if size > r.size {
		s.reserved += size - r.size
		r.size = size
	}
	return nil
}

// Size is the room reserved, bytes.
func (r *Reservation) Size() int64 { return r.size }

// Cancel gives the room back; a no-op after Publish or Cancel.
func (r *Reservation) Cancel() {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	s.reserved -= r.size
	s.broadcast()
}

// Publish hands blob to the store as the next batch and returns its
// sequence number. The blob may be smaller than the reservation (a short
// batch); it may not be larger. Every joined consumer gets it pending.
func (r *Reservation) Publish(blob Blob, info Info) (uint64, error) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.done {
		return 0, fmt.Errorf("publish: reservation already used")
	}
	if blob.Size() > r.size {
		return 0, fmt.Errorf("publish %d bytes into a %d-byte reservation: %w", blob.Size(), r.size, ErrTooLarge)
	}
	r.done = true
	s.reserved -= r.size
	if s.closed {
		return 0, ErrClosed
	}
	m := s.mark(info.Epoch)
	if !m.started {
		m.start, m.started = s.samples, true
	}
	b := &batch{
		seq: s.nextSeq, info: info, first: s.samples, at: time.Now(), blob: blob,
		lookups: make(map[CallerID]batchKey),
	}
	s.held[b.seq] = b
	s.nextSeq++
	s.samples += uint64(info.Samples)
	m.outputSoFar += info.Samples
	m.lastEndPos = info.EndPos
	if info.Last {
		s.endEpoch(info.Epoch)
	}
	s.used += blob.Size()
	s.stats.published++
	s.stats.publishedBytes += blob.Size()
	s.stats.largest = max(s.stats.largest, blob.Size())
	s.stats.lastPublish = time.Now()
	s.broadcast()
	return b.seq, nil
}

// EndEpoch says epoch e is over though its last batch was published
// without saying so (its last samples were skipped).
func (s *Store) EndEpoch(e int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endEpoch(e)
	s.broadcast()
}

// endEpoch: the next epoch starts where e ends. Callers hold s.mu.
func (s *Store) endEpoch(e int) {
	m := s.mark(e)
	m.end, m.ended = s.samples, true
	if !m.started {
		m.start, m.started = s.samples, true
	}
	next := s.mark(e + 1)
	next.start, next.started = s.samples, true
}

// mark returns epoch e's mark, creating it. Callers hold s.mu.
func (s *Store) mark(e int) *epochMark {
	m := s.epochs[e]
	if m == nil {
		m = &epochMark{boundaries: map[int]int{}}
		s.epochs[e] = m
		s.pruneEpochs()
	}
	return m
}

// pruneEpochs forgets the marks of epochs nothing can ask about again,
// so that a run of --epochs 0 keeps a few: those before the newest but
// one, before every held batch's, and before the epoch that each active
// consumer reads in. Callers hold s.mu.
func (s *Store) pruneEpochs() {
	keep := max(s.planned, s.currentEpoch()) - 1
	for _, b := range s.held {
		keep = min(keep, b.info.Epoch)
	}
	for _, c := range s.consumers {
		if !c.active() {
			continue
		}
		e := c.joinEpoch
		if last, ok := c.batches.last(); ok {
			e += last.epoch
		}
		keep = min(keep, e)
	}
	for e := range s.epochs {
		if e < keep {
			delete(s.epochs, e)
		}
	}
}

// Plan orders one producer epoch. splits maps each live split to its
// order position in the previous epoch; it returns each split's output
// position in the new one.
type Plan func(splits map[int]int) map[int]int

// PlanEpoch fixes epoch e's order with plan, atomically with joins: a
// consumer that joins mid-epoch e-1 either is in splits, or joins after
// and starts in epoch e.
func (s *Store) PlanEpoch(e int, plan Plan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := map[int]int{}
	if prev := s.epochs[e-1]; prev != nil {
		for id, sp := range s.splits {
			switch {
			case sp.epoch == e-1:
				in[id] = sp.pos
			default:
				if pos, ok := prev.boundaries[id]; ok {
					in[id] = pos
				}
			}
		}
	}
	out := plan(in)
	m := s.mark(e)
	for id, pos := range out {
		m.boundaries[id] = pos
	}
	s.planned = e
	s.broadcast()
}

// WaitNeed blocks until some consumer needs the sample at order position
// pos of producer epoch e: the producer makes only what will be read.
func (s *Store) WaitNeed(ctx context.Context, e, pos int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.needed(e, pos) {
		if s.closed {
			return ErrClosed
		}
		s.stats.producerIdle = true
		err := s.wait(ctx)
		s.stats.producerIdle = false
		if err != nil {
			return err
		}
	}
	return nil
}

// needed: epochs before Config.Epochs are made for whoever joins; later
// ones only as far as a late joiner's last epoch reaches. Callers hold s.mu.
func (s *Store) needed(e, pos int) bool {
	return pos < s.needBound(e, pos+1)
}

func (m *epochMark) boundaryOf(id int) (int, bool) {
	if m == nil {
		return 0, false
	}
	pos, ok := m.boundaries[id]
	return pos, ok
}
