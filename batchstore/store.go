package batchstore

import (
	"context"
	"errors"
	"fmt"
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
	Epoch    int  // producer epoch, from 0
	Index    int  // batch index within the epoch, from 0
	Samples  int  // number of samples in the batch
	FirstPos int  // position in the epoch's order of its first sample
	EndPos   int  // position after its last sample (failed samples in between count)
	Last     bool // the epoch's last batch
	// Indices are its samples' dataset indices, in order: what a
	// consumer's subset picks by. Nil where the producer has none (an
	// unordered ingest), and then no consumer may have a subset.
	Indices []int32
}

// Config is what the store must know of the stream.
type Config struct {
	// Limit bounds the bytes of held and reserved batches.
	Limit int64
	// BatchSize is the producer's batch size, every consumer's default.
	BatchSize int
	// Epochs each consumer reads, whenever it joins; 0 means forever.
	Epochs int
	// Samples in the dataset: bounds the batch numbers that can exist.
	Samples int
	// JoinAtEpoch makes consumers wait for the next producer epoch
	// instead of joining mid-epoch.
	JoinAtEpoch bool
	// SizeOf is the size of a batch file of n samples, where the format
	// fixes it (the built-in producer's). Nil when it depends on the
	// samples (ingest): then Measure must be set.
	SizeOf func(n int) int64
	// Measure is the size of a consumer's file cut from pieces; by
	// default SizeOf of their samples.
	Measure func(pieces []Piece) int64
	// MaxBatches bounds the batches held at once whatever their bytes (in
	// GPU mode each holds one of a fixed number of slabs); 0: no bound.
	MaxBatches int
	// Lingering is the memory of freed batches that the kernel still
	// holds: with passthrough, a reader's mapping outlives the close
	// that released the batch (np.memmap maps and closes at once). It
	// counts against Limit, so the producer waits for it too; the store
	// polls it while it keeps the producer waiting, as no event says
	// when a mapping goes. Negative: the backing cannot tell. Nil: nothing
	// lingers.
	Lingering func() int64
	// Node is this mount's place among the nodes of trials that span
	// several; the zero value is one node.
	Node Node
	// Unordered: the producer owns the order (an ingest that was given no sample count).
	// A consumer joins at the oldest held batch and its epochs end where
	// the producer's do; nothing is stitched.
	Unordered bool
}

// Store is the bounded buffer. The zero value is not usable; call New.
//
// One mutex, mu, guards everything below and in the four parts; a method
// of a part is called with it held, and only Store's exported methods
// take it. The parts split the state by concern, each in its own files:
//
//   - buf (buffer.go): the held batches, their bytes, reservations,
//     freeing and lingering memory: what the producer waits on.
//   - ros (consumer.go, placement.go, lookup.go, lease.go, subset.go): the
//     consumers, where each is placed, the batches it resolves to, its
//     leases.
//   - dem (demand.go, settle.go, order.go): the epochs' orders and what
//     the producer is asked to make: demand flowing against the data.
//   - ev (evict.go): the watch that evicts or fails consumers that
//     cannot progress.
type Store struct {
	mu       sync.Mutex
	cfg      Config
	finished bool  // the producer will publish nothing more
	failure  error // the producer stopped on this error: nothing more comes
	closed   bool
	changed  chan struct{} // closed and replaced on every change: a broadcast
	start    time.Time

	buf buffer
	ros roster
	dem demand
	ev  evictor
	inv Invalidator // told of every free (invalidator.go)
	// universe is what is made while no consumer says what it wants, and
	// each consumer's data until it sets a subset: nil (everything) on one
	// node, this node's share of all the data across nodes (node.go).
	universe *Subset
}

// MaxBatchSize bounds every batch size, the producer's and consumers':
// far above any real batch, and low enough that sample arithmetic on
// batch sizes cannot overflow.
const MaxBatchSize = 1 << 24

// New returns a store for cfg.
func New(cfg Config) *Store {
	cfg.BatchSize = min(max(cfg.BatchSize, 1), MaxBatchSize)
	if cfg.SizeOf == nil && cfg.Measure == nil {
		cfg.SizeOf = func(n int) int64 { return int64(n) }
	}
	if cfg.Measure == nil {
		sizeOf := cfg.SizeOf
		cfg.Measure = func(pieces []Piece) int64 {
			n := 0
			for _, p := range pieces {
				n += p.To - p.From
			}
			return sizeOf(n)
		}
	}
	s := &Store{
		cfg:     cfg,
		changed: make(chan struct{}),
		start:   time.Now(),
		inv:     noInvalidator{},
	}
	s.buf = buffer{s: s, held: make(map[uint64]*batch)}
	s.ros = roster{s: s, consumers: make(map[string]*consumer), splits: make(map[int]*split), unwatched: time.Now(), neededBy: make(map[uint64]*consumer)}
	s.dem = demand{s: s, epochs: make(map[int]*epochMark), ordered: -1}
	s.ev = evictor{s: s}
	if u, err := cfg.Node.cut(nil, false); err == nil {
		s.universe = u
	} else { // no sample at all: nothing to make (the producer says why)
		s.universe = &Subset{form: "none"}
	}
	return s
}

// Limit is the buffer size in bytes.
func (s *Store) Limit() int64 { return s.cfg.Limit }

// broadcast wakes every waiter; callers hold Store.mu.
func (s *Store) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait releases s.mu until the next change or until ctx is done. It
// returns ErrInterrupted when ctx is done first. callers hold Store.mu.
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

// Finish says the producer will publish nothing more: waiters past the
// last batch get ErrNotFound.
func (s *Store) Finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = true
	s.broadcast()
}

// Fail says the producer stopped on err and will publish nothing more:
// what is held stays readable, and waiters past it get ErrProducerFailed,
// never the ErrNotFound that means the end of the data.
func (s *Store) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure = err
	s.broadcast()
}

// Failure is why the producer stopped before the end of its data, or
// nil.
func (s *Store) Failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
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
	if s.closed && len(s.buf.held) == 0 {
		return nil
	}
	s.closed = true
	var errs []error
	for seq, b := range s.buf.held {
		if err := b.blob.Free(); err != nil {
			errs = append(errs, fmt.Errorf("free batch %d: %w", seq, err))
		}
		delete(s.buf.held, seq)
		s.inv.Freed(seq)
	}
	s.buf.used = 0
	s.broadcast()
	return errors.Join(errs...)
}
