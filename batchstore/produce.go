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
	if size > s.limit {
		return nil, fmt.Errorf("reserve %d bytes of a %d-byte buffer: %w", size, s.limit, ErrTooLarge)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var began time.Time
	for s.used+s.reserved+size > s.limit {
		if s.closed {
			return nil, ErrClosed
		}
		if began.IsZero() {
			began = time.Now()
			s.stats.producerWaits++
			s.stats.producerWaiting = true
		}
		err := s.wait(ctx)
		if err != nil {
			s.stats.producerWaiting = false
			s.stats.producerWait += time.Since(began)
			return nil, err
		}
	}
	if !began.IsZero() {
		s.stats.producerWaiting = false
		s.stats.producerWait += time.Since(began)
	}
	if s.closed {
		return nil, ErrClosed
	}
	s.reserved += size
	return &Reservation{s: s, size: size}, nil
}

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
	b := &batch{
		seq:     s.nextSeq,
		info:    info,
		at:      time.Now(),
		blob:    blob,
		pending: make(map[*consumer]struct{}, len(s.consumers)),
		lookups: make(map[CallerID]*consumer),
	}
	for _, c := range s.consumers {
		if c.active() {
			b.pending[c] = struct{}{}
			if c.joinedEpoch < 0 {
				c.joinedEpoch = info.Epoch
			}
		}
	}
	s.held[b.seq] = b
	s.nextSeq++
	s.used += blob.Size()
	s.stats.published++
	s.stats.publishedBytes += blob.Size()
	s.stats.samplesPublished += uint64(info.Samples)
	s.stats.lastPublish = time.Now()
	s.broadcast()
	return b.seq, nil
}
