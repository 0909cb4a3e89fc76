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
	w := roomWait{s: s}
	defer w.end()
	for !s.fits(size) {
		if err := w.wait(ctx, size); err != nil {
			return nil, err
		}
	}
	if s.closed {
		return nil, ErrClosed
	}
	s.reserved += size
	return &Reservation{s: s, size: size}, nil
}

// Grow makes the reservation at least size bytes, waiting for room for
// the difference as Reserve does (an ingested batch, whose size is known
// only as it is written). Concurrent calls are safe: each waits until
// the room it asks for is held.
func (r *Reservation) Grow(ctx context.Context, size int64) error {
	s := r.s
	if size > s.cfg.Limit {
		return fmt.Errorf("grow to %d bytes of a %d-byte buffer: %w", size, s.cfg.Limit, ErrTooLarge)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := roomWait{s: s}
	defer w.end()
	for {
		switch {
		case r.done:
			return fmt.Errorf("grow: reservation already used")
		case size <= r.size:
			return nil
		case s.fits(size - r.size):
			s.reserved += size - r.size
			r.size = size
			return nil
		}
		if err := w.wait(ctx, size-r.size); err != nil {
			return err
		}
	}
}

// roomWait is one wait of the producer for room in the buffer, kept in
// the statistics that status and the deadlock watch read.
type roomWait struct {
	s     *Store
	began time.Time
}

// wait waits for the next change, the producer needing size more bytes.
// Callers hold s.mu.
func (w *roomWait) wait(ctx context.Context, size int64) error {
	s := w.s
	if s.closed {
		return ErrClosed
	}
	if w.began.IsZero() {
		w.began = time.Now()
		s.stats.producerWaits++
		s.stats.producerWaiting = true
		s.broadcast() // a consumer that only its own short batch can free looks again (stuck)
	}
	s.stats.lingerBlocked = s.used+s.reserved+size <= s.cfg.Limit
	s.stats.waitingFor = size
	return s.waitOrPoll(ctx)
}

// end closes the wait's statistics. Callers hold s.mu.
func (w *roomWait) end() {
	if w.began.IsZero() {
		return
	}
	s := w.s
	s.stats.producerWaiting, s.stats.lingerBlocked = false, false
	s.stats.producerWait += time.Since(w.began)
	s.endMappedDeadlocks()
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
	// A consumer may already be past it: one that read its stitched first
	// epoch goes on at a later producer epoch, and one placed at a later
	// epoch (its subset was not in this one's plan) starts there: neither
	// reads this batch, which must not wait for a first reader then.
	for _, c := range s.consumers {
		if !c.active() {
			continue
		}
		if (!c.startKnown && b.info.Epoch < c.joinEpoch) || (c.startKnown && s.lowSample(c) >= b.end()) {
			b.passed = true
			defer s.maybeFree(b)
			break
		}
	}
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

// endEpoch: the next epoch starts where e ends. An epoch that ends with
// no sample published, none passed over for want of a consumer, had
// every sample of the dataset skipped (each epoch's order holds every
// sample not known bad): nothing can be made again, and waiters get
// ErrNoSamples instead of waiting forever.
// Callers hold s.mu.
func (s *Store) endEpoch(e int) {
	m := s.mark(e)
	if m.outputSoFar == 0 && len(m.drops) == 0 && s.failure == nil {
		s.failure = fmt.Errorf("producer epoch %d ended with none: %w", e, ErrNoSamples)
	}
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
// order position in the previous epoch; wanted says which dataset
// indices some consumer's subset holds (every one with a nil subset). It
// returns each split's output position in the new one.
type Plan func(splits map[int]int, wanted func(index int) bool) map[int]int

// PlanEpoch fixes epoch e's order with plan, atomically with joins: a
// consumer that joins mid-epoch e-1 either is in splits, or joins after
// and starts in epoch e.
func (s *Store) PlanEpoch(e int, plan Plan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A split binds the one epoch after the one it was made in: the
	// joiner's first epoch ends there, and its later ones are whole
	// producer epochs, so no order keeps a piece of an earlier one.
	in := map[int]int{}
	for id, sp := range s.splits {
		if sp.epoch == e-1 {
			in[id] = sp.pos
		}
	}
	wanted := s.wanted()
	out := plan(in, wanted.Has)
	m := s.mark(e)
	m.wanted = wanted
	for id, pos := range out {
		m.boundaries[id] = pos
		delete(s.splits, id) // planned: it binds no later epoch
	}
	s.planned = e
	s.broadcast()
}

// wanted is what the active, decided consumers' subsets hold together,
// now and from their next epochs; nil (everything) if one has none, or
// none is decided. Callers hold s.mu.
func (s *Store) wanted() *Subset {
	u, some := s.wantedBy(func(*consumer) bool { return true })
	if !some {
		return nil
	}
	return u
}

// WaitNeed blocks until some consumer needs the sample at order position
// pos of producer epoch e: the producer makes only what will be read.
func (s *Store) WaitNeed(ctx context.Context, e, pos int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.needed(e, pos) || s.failure != nil {
		switch {
		case s.failure != nil:
			return s.failure
		case s.closed:
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

// Needs says whether some consumer needs producer epoch e now (its first
// sample): past Config.Epochs, only a late joiner's epochs reach there.
func (s *Store) Needs(e int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.needed(e, 0)
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
