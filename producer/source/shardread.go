package source

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Shard-granular reading. A remote store answers a GET in tens of
// milliseconds and bills it: reading a sample with a ranged GET of its own
// makes the store, not the cores, set the pace, and costs a request per
// sample per epoch. Once the producer has planned an epoch (PlanEpoch),
// each shard from which the epoch reads a good part is read whole, in one
// request, a few shards ahead of the workers, and its samples are served
// from memory; a shard is dropped once the epoch has taken every sample
// it wanted of it. The epoch's order groups samples by shard
// (ShardShuffle), so a few shards are held at a time.

// DefaultShardMemory bounds the bytes of whole shards held or being read
// at once: the shuffle window, and the read-ahead that hides a store's
// first-byte latency.
const DefaultShardMemory = 512 << 20

// wholeFraction is where whole-shard reading pays: a shard is read whole
// when the epoch wants at least this fraction of its samples, else its
// samples are read alone by ranged reads (a sparse subset costs fewer
// bytes that way: a quarter of a shard's samples read alone is about a
// quarter of its bytes in that many requests, against one request for all
// of them).
const wholeFraction = 4

// shardReader holds whole shards for one epoch's plan.
type shardReader struct {
	s      *Shards
	budget int64

	mu      sync.Mutex
	held    map[int32]*wholeShard
	bytes   int64   // of shards held or being read
	whole   []bool  // by shard: read whole in this epoch
	left    []int32 // by shard: samples the epoch still takes from it
	seq     []int32 // the shards read whole, in the order the epoch first uses them
	at      map[int32]int
	ahead   int  // seq[:ahead] have been asked for
	started bool // the epoch's first sample was asked for
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc

	// Requests and Bytes count whole-shard reads, for status and tests.
	Requests, Bytes atomic.Int64
}

// shardBufs keeps the buffers of shards dropped for the next reads: a
// new buffer per shard read would let the heap grow to twice the budget
// between collections (1.3 GiB of RSS for a 512 MiB budget, measured
// over 1,282 shards), where reuse keeps it at the budget. The buffers
// are mapped outside Go's heap: in it, their half a gigabyte would set
// the collector's target to twice that, and the garbage every sample
// makes would fill it (1.1 GiB measured with reuse alone).
type shardBufs struct {
	mu    sync.Mutex
	free  [][]byte
	bytes int64
	limit int64
}

// get is a buffer of n bytes, reused if one is free.
func (p *shardBufs) get(n int64) []byte {
	p.mu.Lock()
	for k, b := range p.free {
		if int64(cap(b)) >= n {
			p.free[k] = p.free[len(p.free)-1]
			p.free = p.free[:len(p.free)-1]
			p.bytes -= int64(cap(b))
			p.mu.Unlock()
			return b[:n]
		}
	}
	p.mu.Unlock()
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, n) // on the heap, then: slower to give back, still correct
	}
	return b
}

// put keeps b for a later get, up to limit bytes of them.
func (p *shardBufs) put(b []byte) {
	if b == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bytes+int64(cap(b)) <= p.limit {
		p.free = append(p.free, b[:cap(b)])
		p.bytes += int64(cap(b))
		return
	}
	unix.Munmap(b[:cap(b)]) // a heap buffer (Mmap failed) is refused: the collector's
}

// wholeShard is one shard's bytes, once ready is closed.
type wholeShard struct {
	ready chan struct{}
	data  []byte
	err   error
	// readers copying out of data right now, and whether it was dropped
	// meanwhile: the last of them gives its buffer back. Guarded by the
	// reader's mu.
	readers int
	dropped bool
}

// Shard is the shard that sample i is in: what ShardShuffle groups by.
func (s *Shards) Shard(i int) int { return int(s.samples[i].shard) }

// ShardMemory sets the bytes of whole shards held at once (0: read every
// sample alone, as before PlanEpoch existed).
func (s *Shards) ShardMemory(bytes int64) { s.memory = bytes }

// WholeReads is how many whole-shard reads were made, and their bytes.
func (s *Shards) WholeReads() (requests, bytes int64) {
	s.readerMu.Lock()
	r := s.reader
	s.readerMu.Unlock()
	if r == nil {
		return s.wholeRequests, s.wholeBytes
	}
	return s.wholeRequests + r.Requests.Load(), s.wholeBytes + r.Bytes.Load()
}

// PlanEpoch says which samples the next epoch reads, in order: the
// shards it wants much of are read whole, in that order, a few ahead.
// The previous epoch's shards are dropped.
func (s *Shards) PlanEpoch(order []int) {
	s.readerMu.Lock()
	defer s.readerMu.Unlock()
	if old := s.reader; old != nil {
		old.close()
		s.wholeRequests += old.Requests.Load()
		s.wholeBytes += old.Bytes.Load()
		s.reader = nil
	}
	if s.memory <= 0 {
		return
	}
	if s.bufs == nil || s.bufs.limit != s.memory {
		s.bufs = &shardBufs{limit: s.memory}
	}
	r := &shardReader{s: s, budget: s.memory, held: map[int32]*wholeShard{}, at: map[int32]int{},
		whole: make([]bool, len(s.paths)), left: make([]int32, len(s.paths))}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	for _, i := range order {
		r.left[s.samples[i].shard]++
	}
	for sh := range s.paths {
		n := s.shardSamples[sh]
		// Read whole where the epoch wants a good part of it and it fits
		// the budget beside a few others.
		r.whole[sh] = n > 0 && int64(r.left[sh])*wholeFraction >= int64(n) && s.sizes[sh] > 0 && s.sizes[sh] <= s.memory/4
	}
	for _, i := range order {
		sh := s.samples[i].shard
		if _, ok := r.at[sh]; !ok && r.whole[sh] {
			r.at[sh] = len(r.seq)
			r.seq = append(r.seq, sh)
		}
	}
	s.reader = r // its reads start with the epoch's first sample: a cache may serve them all
}

// close stops the reads ahead, waits for them, and keeps their buffers
// for the next epoch's.
func (r *shardReader) close() {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	for sh, w := range r.held {
		r.dropLocked(sh, w)
	}
}

// fill asks for the next shards of the epoch while the budget allows.
// Callers hold r.mu.
func (r *shardReader) fill() {
	for r.ahead < len(r.seq) {
		sh := r.seq[r.ahead]
		if _, ok := r.held[sh]; ok {
			r.ahead++
			continue
		}
		size := r.s.sizes[sh]
		if r.bytes > 0 && r.bytes+size > r.budget {
			return
		}
		r.ahead++
		r.load(sh)
	}
}

// load starts reading shard sh whole. Callers hold r.mu.
func (r *shardReader) load(sh int32) *wholeShard {
	w := &wholeShard{ready: make(chan struct{})}
	r.held[sh] = w
	size := r.s.sizes[sh]
	r.bytes += size
	r.wg.Go(func() {
		defer close(w.ready)
		buf := r.s.bufs.get(size)
		if err := r.s.files.readAt(r.ctx, r.s.paths[sh], r.s.versions[sh], buf, 0); err != nil {
			r.s.bufs.put(buf)
			w.err = err
			return
		}
		r.Requests.Add(1)
		r.Bytes.Add(size)
		w.data = buf
	})
	return w
}

// sample copies sample i's image member into scratch from its shard, read
// whole; ok is false where the epoch does not read its shard whole.
func (r *shardReader) sample(ctx context.Context, i int, scratch *[]byte) (b []byte, ok bool, err error) {
	smp := r.s.samples[i]
	sh := smp.shard
	r.mu.Lock()
	if !r.whole[sh] {
		r.mu.Unlock()
		return nil, false, nil
	}
	if !r.started {
		r.started = true
		r.fill()
	}
	w := r.held[sh]
	if w == nil {
		// Asked before its turn, or again (a retry): read it now if the
		// budget allows, else this sample alone.
		if r.bytes+r.s.sizes[sh] > r.budget {
			r.mu.Unlock()
			return nil, false, nil
		}
		w = r.load(sh)
	}
	r.mu.Unlock()
	select {
	case <-w.ready:
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
	if w.err != nil {
		r.drop(sh, w)
		return nil, true, w.err
	}
	n := int(smp.size)
	r.mu.Lock()
	if w.data == nil { // given back already (its count ran out early, a retry): this sample alone
		r.mu.Unlock()
		return nil, false, nil
	}
	w.readers++
	r.mu.Unlock()
	if smp.offset < 0 || smp.offset+int64(n) > int64(len(w.data)) {
		r.mu.Lock()
		w.readers--
		r.mu.Unlock()
		return nil, true, fmt.Errorf("sample %d: member at %d+%d past the shard's %d bytes: %w", i, smp.offset, n, len(w.data), ErrShardChanged)
	}
	if cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	b = (*scratch)[:n]
	copy(b, w.data[smp.offset:])
	r.mu.Lock()
	w.readers--
	if r.left[sh]--; r.left[sh] <= 0 {
		r.dropLocked(sh, w)
	}
	if w.dropped && w.readers == 0 {
		r.s.bufs.put(w.data)
		w.data = nil
	}
	r.mu.Unlock()
	return b, true, nil
}

// drop forgets shard sh's read w (failed: a later sample reads it again)
// and asks for the next.
func (r *shardReader) drop(sh int32, w *wholeShard) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLocked(sh, w)
}

func (r *shardReader) dropLocked(sh int32, w *wholeShard) {
	if r.held[sh] != w {
		return
	}
	delete(r.held, sh)
	r.bytes -= r.s.sizes[sh]
	w.dropped = true
	if w.readers == 0 { // else the last one copying out gives it back
		r.s.bufs.put(w.data)
		w.data = nil
	}
	r.fill()
}

// ShardShuffle orders seg (dataset indices) for reading shard by shard:
// its shards in a random order, each shard's samples shuffled, then the
// samples of each block of `window` consecutive shards shuffled together.
// Every sample stays exactly once; a block's shards are what is held at
// once (window of them, and the next block's being read ahead).
func ShardShuffle(rng *rand.Rand, seg []int, shardOf func(int) int, window int) {
	if len(seg) < 2 {
		return
	}
	window = max(window, 1)
	byShard := map[int][]int{}
	var shards []int
	for _, i := range seg {
		sh := shardOf(i)
		if _, ok := byShard[sh]; !ok {
			shards = append(shards, sh)
		}
		byShard[sh] = append(byShard[sh], i)
	}
	rng.Shuffle(len(shards), func(a, b int) { shards[a], shards[b] = shards[b], shards[a] })
	out := seg[:0]
	for k := 0; k < len(shards); k += window {
		from := len(out)
		for _, sh := range shards[k:min(k+window, len(shards))] {
			out = append(out, byShard[sh]...)
		}
		block := out[from:]
		rng.Shuffle(len(block), func(a, b int) { block[a], block[b] = block[b], block[a] })
	}
}

// ShuffleWindow is how many shards a block of ShardShuffle may hold for
// a budget of memory bytes: two blocks are held at once (one read, one
// read ahead), each of shards of the average size. 0 where shards are not
// read whole (ShardMemory 0): samples are read alone, in a uniform order.
func (s *Shards) ShuffleWindow() int {
	var total int64
	for _, b := range s.sizes {
		total += b
	}
	if s.memory <= 0 {
		return 0
	}
	if total <= 0 {
		return 1
	}
	avg := max(total/int64(len(s.sizes)), 1)
	return int(max(s.memory/2/avg, 1))
}
