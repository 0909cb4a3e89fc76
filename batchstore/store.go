package batchstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Blob is one published batch's bytes, kept in memory-backed storage.
type Blob interface {
	// Size is the exact length of the batch file.
	Size() int64
	// Fd is a descriptor the kernel can serve reads from (passthrough).
	Fd() int
	// ReadAt serves reads when passthrough is not in use.
	ReadAt(p []byte, off int64) (int, error)
	// Free releases the memory. It is called exactly once.
	Free() error
}

// Info describes a batch's place in the producer's stream.
type Info struct {
	Epoch   int // producer epoch, from 0
	Index   int // batch index within the epoch, from 0
	Samples int // number of samples in the batch
}

// Store is the bounded buffer. The zero value is not usable; call New.
type Store struct {
	mu        sync.Mutex
	limit     int64
	used      int64 // bytes of held batches
	reserved  int64 // bytes promised to the producer, not yet published
	nextSeq   uint64
	maxSeq    uint64 // no batch will ever have seq >= maxSeq
	finished  bool   // the producer will publish nothing more
	closed    bool
	held      map[uint64]*batch
	consumers map[string]*consumer
	changed   chan struct{} // closed and replaced on every change: a broadcast
	stats     storeStats
	start     time.Time
}

type storeStats struct {
	published, freed       uint64
	publishedBytes         int64
	producerWaits          uint64
	producerWaiting        bool
	producerWait           time.Duration
	samplesPublished       uint64
	freeErrors             uint64
	lastFreeError          error
	lastPublish, lastFreed time.Time
}

type batch struct {
	seq      uint64
	info     Info
	at       time.Time // when it was published
	blob     Blob
	pending  map[*consumer]struct{} // consumers that have not consumed it yet
	consumed int                    // how many consumers consumed it
	leases   int                    // open leases, all consumers together
	lookups  map[CallerID]*consumer // who looked it up last, per caller
}

// New returns a store whose held and reserved batches never exceed limit bytes.
func New(limit int64) *Store {
	return &Store{
		limit:     limit,
		maxSeq:    ^uint64(0),
		held:      make(map[uint64]*batch),
		consumers: make(map[string]*consumer),
		changed:   make(chan struct{}),
		start:     time.Now(),
	}
}

// Limit is the buffer size in bytes.
func (s *Store) Limit() int64 { return s.limit }

// broadcast wakes every waiter; callers hold s.mu.
func (s *Store) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait releases s.mu until the next change or until ctx is done. It
// returns ErrInterrupted when ctx is done first. Callers hold s.mu.
func (s *Store) wait(ctx context.Context) error {
	ch := s.changed
	s.mu.Unlock()
	defer s.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ErrInterrupted
	}
}

// ExpectAtMost tells the store that no batch will have sequence number n
// or above, so that lookups past it fail at once instead of blocking.
func (s *Store) ExpectAtMost(n uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxSeq = n
	s.broadcast()
}

// Finish says the producer will publish nothing more: waiters past the
// last batch get ErrNotFound.
func (s *Store) Finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = true
	s.maxSeq = s.nextSeq
	s.broadcast()
}

// Shutdown fails every waiter and every later call with ErrClosed but
// frees nothing: open leases keep reading until the file system is
// unmounted. The FUSE server cannot unmount while a lookup is blocked, so
// Shutdown comes first, then unmount, then Close.
func (s *Store) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.broadcast()
}

// Close shuts down and frees every held batch. Call it when nothing can
// read a lease any more.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed && len(s.held) == 0 {
		return nil
	}
	s.closed = true
	var errs []error
	for seq, b := range s.held {
		if err := b.blob.Free(); err != nil {
			errs = append(errs, fmt.Errorf("free batch %d: %w", seq, err))
		}
		delete(s.held, seq)
	}
	s.used = 0
	s.broadcast()
	return errors.Join(errs...)
}

// oldestHeld is the lowest sequence number still in memory, or nextSeq.
func (s *Store) oldestHeld() uint64 {
	oldest := s.nextSeq
	for seq := range s.held {
		if seq < oldest {
			oldest = seq
		}
	}
	return oldest
}

// heldSeqs lists held sequence numbers in order.
func (s *Store) heldSeqs() []uint64 {
	seqs := make([]uint64, 0, len(s.held))
	for seq := range s.held {
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs
}

// maybeFree frees b if nobody needs it any more. Callers hold s.mu.
func (s *Store) maybeFree(b *batch) {
	if len(b.pending) > 0 || b.consumed == 0 || b.leases > 0 {
		return
	}
	if _, ok := s.held[b.seq]; !ok {
		return
	}
	delete(s.held, b.seq)
	s.used -= b.blob.Size()
	s.stats.freed++
	s.stats.lastFreed = time.Now()
	// A failed free leaks memory but loses no data: report it in status
	// and carry on, the producer must not stall on it.
	if err := b.blob.Free(); err != nil {
		s.stats.freeErrors++
		s.stats.lastFreeError = fmt.Errorf("free batch %d: %w", b.seq, err)
	}
	s.broadcast()
}
