package source

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Shard-granular reading. A remote store answers a GET in tens of
// milliseconds and bills it: reading a sample with a ranged GET of its own
// makes the store, not the cores, set the pace, and costs a request per
// sample per epoch. Once the producer has ordered an epoch (Schedule),
// each shard from which the epoch reads a good part is read whole, in one
// request, a few shards ahead of the workers, and its samples are served
// from memory; a shard is dropped once the epoch has taken every sample
// it wanted of it. The epoch's order groups samples by shard
// (ShardShuffle), so a few shards are held at a time.
//
// The producer also says how it expects the next epoch to begin: once
// every shard of this epoch has been asked for, the next epoch's first
// shards are read ahead (or kept, where this epoch already holds them),
// so that an epoch does not begin by waiting a first byte. Where the
// guess was wrong (a consumer joined and the next epoch was stitched),
// what it read is dropped at the next Schedule: bytes spent, never
// wrong bytes, since every sample is served by the schedule that asks for it.

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

// shardReader holds whole shards, from one epoch's schedule to the next: a
// shard the next schedule reads first stays held. One mutex guards it all.
type shardReader struct {
	s      *Shards
	budget int64 // the shard memory and disk
	bufs   *shardBufs

	mu      sync.Mutex
	held    map[int32]*wholeShard
	bytes   int64   // of shards held or being read
	reading int     // reads under way
	whole   []bool  // by shard: read whole in this epoch
	left    []int32 // by shard: samples the epoch still takes from it
	seq     []int32 // the shards read whole, in the order the epoch first uses them
	ahead   int     // seq[:ahead] have been asked for
	started bool    // the epoch's first sample was asked for
	next    []int32 // the next epoch's first shards, as expected
	nextIn  map[int32]bool
	nextAt  int // next[:nextAt] have been asked for
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc

	// Requests and Bytes count whole-shard reads, for status and tests.
	Requests, Bytes atomic.Int64
	// Carried counts pieces a new schedule found held and kept (read ahead
	// for it, or left from the epoch before); Wasted, those it dropped
	// unused.
	Carried, Wasted atomic.Int64
	// Unroomed counts pieces not read for want of room (the shard disk
	// full): their samples were read alone.
	Unroomed atomic.Int64
}

// wholeShard is one shard's bytes, once ready is closed.
type wholeShard struct {
	ready  chan struct{}
	cancel context.CancelFunc // stops its read, if dropped before it ends
	data   []byte
	err    error
	// A Parquet row group's: where each row's image ends in data
	// (imageRows), or why its images do not decode (bad: each of its
	// samples is skipped for it, none reads it again).
	rows []int64
	bad  error
	// readers copying out of data right now, and whether it was dropped
	// meanwhile: the last of them (or its read, if it was still under
	// way) gives its buffer back. Guarded by the reader's mu.
	readers int
	dropped bool
}

// Shard is the shard that sample i is in.
func (s *Shards) Shard(i int) int { return int(s.samples[i].shard) }

// Schedule says which samples the next epoch reads, in order, and how
// the epoch after it is expected to begin (next; nil: not known): the
// shards it wants much of are read whole, in that order, a few ahead,
// then the next epoch's first ones. A nil order ends whole-shard reading:
// the reads under way stop, waited for, and every shard is dropped.
func (s *Shards) Schedule(order, next []int) {
	s.checks.newEpoch()
	s.readerMu.Lock()
	defer s.readerMu.Unlock()
	s.markEpoch()
	if order == nil || s.memory <= 0 {
		if r := s.reader; r != nil {
			r.close()
			s.retire(r)
			s.reader = nil
		}
		return
	}
	r := s.reader
	if budget := s.room(); r == nil || r.budget != budget {
		if r != nil {
			r.close()
			s.retire(r)
		}
		r = &shardReader{s: s, budget: budget, held: map[int32]*wholeShard{},
			bufs: &shardBufs{memLimit: s.memory + min(s.largestPiece(), s.memory/4), diskLimit: s.disk, dir: s.diskDir}}
		r.ctx, r.cancel = context.WithCancel(context.Background())
		s.reader = r
	}
	r.schedule(order, next)
}

// ReadsWhole implements Sharded.
func (s *Shards) ReadsWhole(i int) bool {
	s.readerMu.Lock()
	r := s.reader
	s.readerMu.Unlock()
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := s.samples[i].piece
	return int(p) < len(r.whole) && r.whole[p]
}

// retire adds a reader's counts to those of readers gone.
func (s *Shards) retire(r *shardReader) {
	s.wholeRequests += r.Requests.Load()
	s.wholeBytes += r.Bytes.Load()
	s.carried += r.Carried.Load()
	s.carriedWasted += r.Wasted.Load()
}

// wholePieces is which pieces of order are worth reading whole, how many
// samples order takes of each, and the former in the order first used.
func (s *Shards) wholePieces(order []int) (whole []bool, left []int32, seq []int32) {
	whole, left = make([]bool, len(s.pieces)), make([]int32, len(s.pieces))
	for _, i := range order {
		left[s.samples[i].piece]++
	}
	budget := s.room()
	for p, pc := range s.pieces {
		// Read whole where the epoch wants enough of it (the format's
		// rule) and it fits the budget beside a few others.
		whole[p] = pc.samples > 0 && s.format.wantsWhole(left[p], pc.samples) && holdable(pc.size, budget)
	}
	seen := make([]bool, len(s.pieces))
	for _, i := range order {
		p := s.samples[i].piece
		if whole[p] && !seen[p] {
			seen[p] = true
			seq = append(seq, p)
		}
	}
	return whole, left, seq
}

// schedule replaces the reader's schedule. The shards held that the new epoch
// reads first (as many as the budget would have read ahead) stay; the
// others are dropped, their reads stopped.
func (r *shardReader) schedule(order, next []int) {
	whole, left, seq := r.s.wholePieces(order)
	var nextSeq []int32
	if next != nil {
		_, _, nextSeq = r.s.wholePieces(next)
	}
	// A shard carried into this epoch is served only while it is still
	// the version it was read from: checked (a stat, a HEAD) outside the
	// lock, which the reads that end the last epoch take.
	r.mu.Lock()
	carried := make([]int32, 0, len(r.held))
	for sh := range r.held {
		carried = append(carried, sh)
	}
	r.mu.Unlock()
	stale := map[int32]bool{}
	for _, sh := range carried {
		stale[sh] = r.s.checkShard(r.s.pieces[sh].shard) != nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.whole, r.left, r.seq, r.ahead, r.started = whole, left, seq, 0, false
	first := r.prefix(seq, r.budget)
	for sh, w := range r.held {
		if !first[sh] || stale[sh] {
			if r.nextIn[sh] { // read ahead or kept for this schedule, by a wrong guess
				r.Wasted.Add(1)
			}
			r.dropLocked(sh, w)
		} else {
			r.Carried.Add(1)
		}
	}
	// Half the budget: the other half holds this epoch's last shards
	// while the next one's first are read.
	r.next, r.nextAt, r.nextIn = nil, 0, r.prefix(nextSeq, r.budget/2)
	for _, sh := range nextSeq {
		if r.nextIn[sh] {
			r.next = append(r.next, sh)
		}
	}
}

// prefix is the first shards of seq whose bytes fit in budget (at least
// one).
func (r *shardReader) prefix(seq []int32, budget int64) map[int32]bool {
	in := map[int32]bool{}
	var sum int64
	for _, sh := range seq {
		if sum += r.s.pieces[sh].size; len(in) > 0 && sum > budget {
			break
		}
		in[sh] = true
	}
	return in
}

// close stops the reads, waits for them, and keeps their buffers for
// later reads.
func (r *shardReader) close() {
	r.cancel()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq, r.next = nil, nil
	for sh, w := range r.held {
		r.dropLocked(sh, w)
	}
	r.bufs.close()
}

// fill asks for the next shards of the epoch while the budget allows,
// then for the next epoch's first ones. Callers hold r.mu.
func (r *shardReader) fill() {
	if !r.started || r.ctx.Err() != nil {
		return // a cache in front may serve the whole epoch: nothing is read before it asks
	}
	if r.readAhead(r.seq, &r.ahead) {
		r.readAhead(r.next, &r.nextAt)
	}
}

// readAhead loads seq[*at:] in order while the budget allows, moving *at
// past what is held or asked; it says whether it got to the end.
// Callers hold r.mu.
func (r *shardReader) readAhead(seq []int32, at *int) bool {
	for ; *at < len(seq); *at++ {
		sh := seq[*at]
		if _, ok := r.held[sh]; ok {
			continue
		}
		if !r.room(sh) || r.reading >= maxReads {
			return false
		}
		r.load(sh)
	}
	return true
}

// maxReads bounds the reads ahead under way at once: a window of a
// thousand pieces is read a few at a time, not a thousand requests at
// once (a store's throughput per node is reached with a few streams).
const maxReads = 16

// room says whether shard sh may be read now. Callers hold r.mu.
func (r *shardReader) room(sh int32) bool {
	return r.bytes == 0 || r.bytes+r.s.pieces[sh].size <= r.budget
}

// load starts reading shard sh whole. Callers hold r.mu.
func (r *shardReader) load(sh int32) *wholeShard {
	ctx, cancel := context.WithCancel(r.ctx)
	w := &wholeShard{ready: make(chan struct{}), cancel: cancel}
	r.held[sh] = w
	pc := r.s.pieces[sh]
	r.bytes += pc.size
	r.reading++
	r.wg.Go(func() {
		defer close(w.ready)
		defer cancel()
		buf, err := r.bufs.get(pc.size)
		var rows []int64
		switch {
		case err != nil:
			r.Unroomed.Add(1)
			buf, err = nil, nil // no data and no error: its samples are read alone
		default:
			rows, err = r.s.format.readPiece(ctx, r.s, pc, buf)
		}
		var bad *groupError
		if errors.As(err, &bad) {
			err = nil // read, and its bytes are the samples' fault
		}
		if err == nil && buf != nil {
			r.Requests.Add(1)
			r.Bytes.Add(pc.readBytes())
			r.s.verified(pc.shard)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.reading--
		defer r.fill()
		switch {
		case w.dropped || err != nil:
			r.bufs.put(buf)
			w.err = err
		case bad != nil:
			r.bufs.put(buf)
			w.data, w.bad = []byte{}, bad
		default:
			w.data, w.rows = buf, rows
		}
	})
	return w
}

// sample copies sample i's image member into scratch from its shard, read
// whole; ok is false where the epoch does not read its shard whole.
func (r *shardReader) sample(ctx context.Context, i int, scratch *[]byte) (b []byte, ok bool, err error) {
	smp := r.s.samples[i]
	sh := smp.piece
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
		if !r.room(sh) {
			r.tookAlone(sh)
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
	r.mu.Lock()
	if w.err != nil && !w.dropped {
		r.dropLocked(sh, w) // a later sample reads it again
		r.mu.Unlock()
		return nil, true, w.err
	}
	if w.data == nil { // dropped (its count ran out early, a retry, a new schedule), or no room: this sample alone
		if !w.dropped {
			r.dropLocked(sh, w) // a later sample tries again
		}
		r.tookAlone(sh)
		r.mu.Unlock()
		return nil, false, nil
	}
	w.readers++
	r.mu.Unlock()
	src, err := r.member(i, w)
	if err == nil {
		*scratch = append((*scratch)[:0], src...)
		b = *scratch
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.release(w)
	// The epoch has taken all it wants of it: dropped, unless the next
	// epoch begins with it and this one has asked for all its shards.
	if r.left[sh]--; r.left[sh] <= 0 && !(r.ahead == len(r.seq) && r.nextIn[sh]) {
		r.dropLocked(sh, w)
	}
	return b, true, err
}

// dropLocked forgets shard sh's read w, stops it if under way, and asks
// for the next. Callers hold r.mu.
func (r *shardReader) dropLocked(sh int32, w *wholeShard) {
	if r.held[sh] != w {
		return
	}
	delete(r.held, sh)
	r.bytes -= r.s.pieces[sh].size
	w.dropped = true
	w.cancel()
	if w.readers == 0 { // else the last one copying out gives it back; a read under way, itself
		r.bufs.put(w.data)
		w.data = nil
	}
	r.fill()
}
