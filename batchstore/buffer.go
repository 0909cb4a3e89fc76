package batchstore

import (
	"context"
	"fmt"
	"iter"
	"sort"
	"time"
)

// buffer is the held batches and the bytes they and reservations take.
// Guarded by Store.mu.
type buffer struct {
	s         *Store
	used      int64 // bytes of held batches
	reserved  int64 // bytes promised to the producer, not yet published
	lingering int64 // Config.Lingering as last read
	nextSeq   uint64
	samples   uint64 // samples published: the next batch's first sample
	held      map[uint64]*batch
	stats     storeStats
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
	c  *consumer
	j  uint64
	rk *rank // the rank of c's that looked it up; nil for the consumer itself
}

// name is whose batch the key names, for messages.
func (k batchKey) name() string {
	if k.rk != nil {
		return RankName(k.c.name, k.rk.n)
	}
	return k.c.name
}

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
	for !s.buf.fits(size) {
		if err := w.wait(ctx, size); err != nil {
			return nil, err
		}
	}
	if s.closed {
		return nil, ErrClosed
	}
	s.buf.reserved += size
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
		case s.buf.fits(size - r.size):
			s.buf.reserved += size - r.size
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
// Callers hold Store.mu.
func (w *roomWait) wait(ctx context.Context, size int64) error {
	s := w.s
	if s.closed {
		return ErrClosed
	}
	if w.began.IsZero() {
		w.began = time.Now()
		s.buf.stats.producerWaits++
		s.buf.stats.producerWaiting = true
		s.broadcast() // a consumer that only its own short batch can free looks again (stuck)
	}
	s.buf.stats.lingerBlocked = s.buf.used+s.buf.reserved+size <= s.cfg.Limit
	s.buf.stats.waitingFor = size
	return s.buf.waitOrPoll(ctx)
}

// end closes the wait's statistics. callers hold Store.mu.
func (w *roomWait) end() {
	if w.began.IsZero() {
		return
	}
	s := w.s
	s.buf.stats.producerWaiting, s.buf.stats.lingerBlocked = false, false
	s.buf.stats.producerWait += time.Since(w.began)
	s.ev.endMappedDeadlocks()
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
	s.buf.reserved -= r.size
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
	s.buf.reserved -= r.size
	if s.closed {
		return 0, ErrClosed
	}
	m := s.dem.mark(info.Epoch)
	if !m.started {
		m.start, m.started = s.buf.samples, true
	}
	b := &batch{
		seq: s.buf.nextSeq, info: info, first: s.buf.samples, at: time.Now(), blob: blob,
		lookups: make(map[CallerID]batchKey),
	}
	s.buf.held[b.seq] = b
	s.buf.nextSeq++
	s.buf.samples += uint64(info.Samples)
	m.outputSoFar += info.Samples
	m.lastEndPos = info.EndPos
	if info.Last {
		s.dem.endEpoch(info.Epoch)
	}
	s.buf.used += blob.Size()
	// A consumer may already be past it: one that read its stitched first
	// epoch goes on at a later producer epoch, and one placed at a later
	// epoch (its subset was not in this one's order) starts there: neither
	// reads this batch, which must not wait for a first reader then.
	for _, c := range s.ros.consumers {
		if !c.active() {
			continue
		}
		if (!c.startKnown && b.info.Epoch < c.joinEpoch) || (c.startKnown && s.ros.lowSample(c) >= b.end()) {
			b.passed = true
			defer s.buf.maybeFree(b)
			break
		}
	}
	s.buf.stats.published++
	s.buf.stats.publishedBytes += blob.Size()
	s.buf.stats.largest = max(s.buf.stats.largest, blob.Size())
	s.buf.stats.lastPublish = time.Now()
	s.broadcast()
	return b.seq, nil
}

// lingerPoll is how often a producer kept waiting by lingering memory
// looks again: a reader's munmap sends no event.
const lingerPoll = 20 * time.Millisecond

// fits says whether size more bytes fit the buffer, lingering memory
// included; it reads Config.Lingering afresh (syscalls) only where that
// can change the answer. callers hold Store.mu.
func (bf *buffer) fits(size int64) bool {
	s := bf.s
	if bf.used+bf.reserved+size > s.cfg.Limit {
		return false
	}
	if s.cfg.Lingering != nil {
		bf.lingering = max(s.cfg.Lingering(), 0)
	}
	return bf.used+bf.reserved+bf.lingering+size <= s.cfg.Limit
}

// waitOrPoll is wait, bounded by lingerPoll while memory lingers.
// Callers hold Store.mu.
func (bf *buffer) waitOrPoll(ctx context.Context) error {
	s := bf.s
	if bf.lingering == 0 {
		return s.wait(ctx)
	}
	poll, cancel := context.WithTimeout(ctx, lingerPoll)
	defer cancel()
	if err := s.wait(poll); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

// fullBatchBytes is the size of one full producer batch: what the format
// says, or the largest published so far. callers hold Store.mu.
func (bf *buffer) fullBatchBytes() int64 {
	s := bf.s
	n := bf.stats.largest
	if s.cfg.SizeOf != nil {
		n = max(n, s.cfg.SizeOf(s.cfg.BatchSize))
	}
	return n
}

// nextHeld is the first sample after x, below limit, of a held batch;
// limit if none. callers hold Store.mu.
func (bf *buffer) nextHeld(x, limit uint64) uint64 {
	next := limit
	for _, h := range bf.held {
		if h.first > x && h.first < next {
			next = h.first
		}
	}
	return next
}

// batch is held batch seq, nil if it is not held.
func (bf *buffer) batch(seq uint64) *batch { return bf.held[seq] }

// batches are the held batches, in no order.
func (bf *buffer) batches() iter.Seq[*batch] {
	return func(yield func(*batch) bool) {
		for _, b := range bf.held {
			if !yield(b) {
				return
			}
		}
	}
}

// tail is the held batches from the newest published back to the first
// not held, newest first.
func (bf *buffer) tail() []*batch {
	var t []*batch
	for seq := bf.nextSeq; seq > 0; seq-- {
		b := bf.held[seq-1]
		if b == nil {
			break
		}
		t = append(t, b)
	}
	return t
}

// published is how many samples have been published.
func (bf *buffer) published() uint64 { return bf.samples }

// lingeringBytes is the memory of freed batches readers still map, as
// last read.
func (bf *buffer) lingeringBytes() int64 { return bf.lingering }

// lastPublish is when a batch was last published.
func (bf *buffer) lastPublish() time.Time { return bf.stats.lastPublish }

// oldest is the oldest batch still held, nil if none.
func (bf *buffer) oldest() *batch { return bf.held[bf.oldestHeld()] }

// waitsForReaders says whether the producer waits for room that only
// consumers' reading can make: it waits, not for mappings to go, and the
// room it waits for has not come since (its wait flag lasts until it runs
// again).
func (bf *buffer) waitsForReaders() bool {
	return bf.stats.producerWaiting && !bf.stats.lingerBlocked && !bf.fits(bf.stats.waitingFor)
}

// waitsForUnmaps says whether the producer waits for readers to unmap
// batches already read (the room it waits for has not come since).
func (bf *buffer) waitsForUnmaps() bool {
	return bf.stats.lingerBlocked && !bf.fits(bf.stats.waitingFor)
}

// full says whether the producer waits for room now, and whether for
// mappings of batches read to go (lingering memory).
func (bf *buffer) full() (waiting, onMappings bool) {
	return bf.stats.producerWaiting, bf.stats.lingerBlocked
}

// setIdle says whether the producer idles: every consumer has what it
// needs.
func (bf *buffer) setIdle(idle bool) { bf.stats.producerIdle = idle }

// oldestHeld is the lowest sequence number still in memory, or nextSeq.
func (bf *buffer) oldestHeld() uint64 {
	oldest := bf.nextSeq
	for seq := range bf.held {
		if seq < oldest {
			oldest = seq
		}
	}
	return oldest
}

// heldSeqs lists held sequence numbers in order.
func (bf *buffer) heldSeqs() []uint64 {
	seqs := make([]uint64, 0, len(bf.held))
	for seq := range bf.held {
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs
}

// maybeFree frees b if nobody needs it any more: no active consumer will
// read it, someone did, and no lease is open on it. callers hold Store.mu.
func (bf *buffer) maybeFree(b *batch) {
	s := bf.s
	if b.leases > 0 || !b.passed || s.ros.anyNeeds(b) {
		return
	}
	if _, ok := bf.held[b.seq]; !ok {
		return
	}
	delete(bf.held, b.seq)
	s.inv.Freed(b.seq)
	bf.used -= b.blob.Size()
	bf.stats.freed++
	bf.stats.lastFreed = time.Now()
	// A failed free leaks memory but loses no data: report it in status
	// and carry on, the producer must not stall on it.
	if err := b.blob.Free(); err != nil {
		bf.stats.freeErrors++
		bf.stats.lastFreeError = fmt.Errorf("free batch %d: %w", b.seq, err)
	}
	s.broadcast()
}

// freeWhatWeCan runs maybeFree over every held batch. callers hold Store.mu.
func (bf *buffer) freeWhatWeCan() {
	for _, b := range bf.held {
		bf.maybeFree(b)
	}
}

// batchAt finds the held batch holding sample x, or nil.
func (bf *buffer) batchAt(x uint64) *batch {
	for _, b := range bf.held {
		if b.first <= x && x < b.end() {
			return b
		}
	}
	return nil
}
