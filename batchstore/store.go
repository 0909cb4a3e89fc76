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
	// instead of joining mid-epoch (--join epoch).
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
	// Unordered: the producer owns the order (ingest without --samples).
	// A consumer joins at the oldest held batch and its epochs end where
	// the producer's do; nothing is stitched.
	Unordered bool
}

// Store is the bounded buffer. The zero value is not usable; call New.
type Store struct {
	mu        sync.Mutex
	cfg       Config
	used      int64 // bytes of held batches
	reserved  int64 // bytes promised to the producer, not yet published
	lingering int64 // Config.Lingering as last read
	nextSeq   uint64
	samples   uint64 // samples published: the next batch's first sample
	finished  bool   // the producer will publish nothing more
	failure   error  // the producer stopped on this error: nothing more comes
	closed    bool
	held      map[uint64]*batch
	epochs    map[int]*epochMark
	planned   int  // the latest producer epoch whose order is fixed, -1 before any
	deciding  bool // the producer asks Wants of each position (the built-in one does)
	splits    map[int]*split
	nextID    int
	consumers map[string]*consumer
	changed   chan struct{} // closed and replaced on every change: a broadcast
	stats     storeStats
	start     time.Time
	unwatched time.Time // since when no consumer is active; zero while one is
	wantGen   uint64    // bumped when the consumers' wants change (settle.go)
	wants     wantsCache
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

type storeStats struct {
	published, freed       uint64
	publishedBytes         int64
	largest                int64 // the largest batch published
	producerWaits          uint64
	producerWaiting        bool
	lingerBlocked          bool  // the producer waits only for lingering memory
	waitingFor             int64 // the bytes the waiting producer needs
	producerIdle           bool  // no consumer needs more samples
	producerWait           time.Duration
	freeErrors             uint64
	lastFreeError          error
	lastPublish, lastFreed time.Time
}

type batch struct {
	seq     uint64
	info    Info
	first   uint64    // global number of its first sample
	at      time.Time // when it was published
	blob    Blob
	leases  int                   // open leases, all consumers together
	passed  bool                  // some consumer has consumed past it
	lookups map[CallerID]batchKey // who looked it up last, per caller
}

func (b *batch) end() uint64 { return b.first + uint64(b.info.Samples) }

// batchKey names one consumer's batch.
type batchKey struct {
	c *consumer
	j uint64
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
	return &Store{
		cfg:       cfg,
		held:      make(map[uint64]*batch),
		epochs:    make(map[int]*epochMark),
		planned:   -1,
		splits:    make(map[int]*split),
		consumers: make(map[string]*consumer),
		changed:   make(chan struct{}),
		start:     time.Now(),
		unwatched: time.Now(),
	}
}

// noteWatchers keeps unwatched: zero while some consumer is active, else
// since when none is. Callers hold s.mu.
func (s *Store) noteWatchers() {
	for _, c := range s.consumers {
		if c.active() {
			s.unwatched = time.Time{}
			return
		}
	}
	if s.unwatched.IsZero() {
		s.unwatched = time.Now()
	}
}

// Limit is the buffer size in bytes.
func (s *Store) Limit() int64 { return s.cfg.Limit }

// fullBatchBytes is the size of one full producer batch: what the format
// says, or the largest published so far. Callers hold s.mu.
func (s *Store) fullBatchBytes() int64 {
	n := s.stats.largest
	if s.cfg.SizeOf != nil {
		n = max(n, s.cfg.SizeOf(s.cfg.BatchSize))
	}
	return n
}

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

// lingerPoll is how often a producer kept waiting by lingering memory
// looks again: a reader's munmap sends no event.
const lingerPoll = 20 * time.Millisecond

// fits says whether size more bytes fit the buffer, lingering memory
// included; it reads Config.Lingering afresh (syscalls) only where that
// can change the answer. Callers hold s.mu.
func (s *Store) fits(size int64) bool {
	if s.used+s.reserved+size > s.cfg.Limit {
		return false
	}
	if s.cfg.Lingering != nil {
		s.lingering = max(s.cfg.Lingering(), 0)
	}
	return s.used+s.reserved+s.lingering+size <= s.cfg.Limit
}

// waitOrPoll is wait, bounded by lingerPoll while memory lingers.
// Callers hold s.mu.
func (s *Store) waitOrPoll(ctx context.Context) error {
	if s.lingering == 0 {
		return s.wait(ctx)
	}
	poll, cancel := context.WithTimeout(ctx, lingerPoll)
	defer cancel()
	if err := s.wait(poll); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
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

// maybeFree frees b if nobody needs it any more: no active consumer will
// read it, someone did, and no lease is open on it. Callers hold s.mu.
func (s *Store) maybeFree(b *batch) {
	if b.leases > 0 || !b.passed || s.neededByAnyone(b) {
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

// freeWhatWeCan runs maybeFree over every held batch. Callers hold s.mu.
func (s *Store) freeWhatWeCan() {
	for _, b := range s.held {
		s.maybeFree(b)
	}
}

// neededByAnyone: some active consumer has samples of b still to read.
func (s *Store) neededByAnyone(b *batch) bool {
	for _, c := range s.consumers {
		if s.needs(c, b) {
			return true
		}
	}
	return false
}

// batchAt finds the held batch holding sample x, or nil.
func (s *Store) batchAt(x uint64) *batch {
	for _, b := range s.held {
		if b.first <= x && x < b.end() {
			return b
		}
	}
	return nil
}
