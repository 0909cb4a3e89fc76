package batchstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Piece is a run of samples of one producer batch.
type Piece struct {
	Seq      uint64 // the producer batch
	From, To int    // sample offsets within it
	Total    int    // samples in that producer batch
	// Blob is the producer batch's bytes: its format's header may be read
	// at any time, its data only under a lease.
	Blob Blob
}

// Ref identifies one batch as one consumer sees it.
type Ref struct {
	Consumer int    // the consumer's id, unique for the store's life
	Local    uint64 // the consumer's own number for it
	Epoch    int    // the consumer's own epoch
	Index    int    // its index within that epoch
	Samples  int
	Size     int64
	Time     time.Time // when its last sample was published
	// Direct: the batch is exactly one producer batch, with the same
	// epoch and index, and is served as that shared file (Seq).
	Direct bool
	Seq    uint64
	// Pieces make the batch up, in order, when it is not Direct.
	Pieces []Piece
}

// epochEnd is the global sample where c's own epoch k ends, if known.
// A consumer that joined mid-epoch (a split) has a stitched first epoch,
// from its join to its split's end in the next producer epoch; each
// later epoch of its is a whole producer epoch, the one after that (the
// rest of the one its first epoch ended in is not its). Callers hold
// s.mu.
func (ro *roster) epochEnd(c *consumer, k int) (uint64, bool) {
	s := ro.s
	if c.splitID != 0 && k > 0 {
		return ro.epochStart(c.joinEpoch + k + 2)
	}
	m := s.dem.epochs[c.joinEpoch+k+1]
	if m == nil || !m.started {
		return 0, false
	}
	if c.splitID == 0 {
		return m.start, true
	}
	pos, ok := m.boundaries[c.splitID]
	if !ok {
		return 0, false
	}
	n, ok := s.dem.samplesBefore(m, pos)
	if !ok {
		return 0, false
	}
	return m.start + uint64(n), true
}

// epochStart is the global sample where producer epoch e starts, if known.
// Callers hold Store.mu.
func (ro *roster) epochStart(e int) (uint64, bool) {
	s := ro.s
	m := s.dem.epochs[e]
	if m == nil || !m.started {
		return 0, false
	}
	return m.start, true
}

// resolved says what resolve could tell of a consumer's batch.
type resolved int

const (
	unknownYet resolved = iota // its samples or its epoch's end are not published yet
	known                      // computed
	pastEnd                    // it would lie past the consumer's last epoch
)

// resolve computes c's batch j if it can be known yet: its samples are
// published and where its epoch ends is known. A batch never has zero
// samples: an epoch with none (all skipped) is passed over whole.
// Callers hold Store.mu.
func (ro *roster) resolve(c *consumer, j uint64) (cbatch, resolved) {
	s := ro.s
	if !c.startKnown {
		m := s.dem.epochs[c.joinEpoch]
		if m == nil || !m.started {
			return cbatch{}, unknownYet
		}
		c.start, c.startKnown = m.start, true
	}
	for c.batches.computed() <= j {
		cb := cbatch{start: c.start}
		if prev, ok := c.batches.last(); ok {
			cb.start, cb.epoch, cb.index = prev.end, prev.epoch, prev.index+1
		}
		if state := ro.next(c, &cb); state != known {
			return cbatch{}, state
		}
		c.batches.add(cb)
	}
	cb, ok := c.batches.get(j)
	if !ok {
		return cbatch{}, unknownYet
	}
	return cb, known
}

// next fills cb, the batch that starts at cb.start in c's own epoch
// cb.epoch (or a later one, if that one is over or has none of c's
// samples left). callers hold Store.mu.
func (ro *roster) next(c *consumer, cb *cbatch) resolved {
	s := ro.s
	for {
		end, endKnown := ro.epochEnd(c, cb.epoch)
		for endKnown && cb.start >= end { // this epoch is over, or empty: the next one
			cb.epoch, cb.index = cb.epoch+1, 0
			if s.cfg.Epochs > 0 && cb.epoch >= s.cfg.Epochs {
				return pastEnd
			}
			if c.splitID != 0 { // past its stitched first epoch: whole producer epochs
				start, known := ro.epochStart(c.joinEpoch + cb.epoch + 1)
				if !known {
					return unknownYet
				}
				cb.start = max(cb.start, start)
			}
			end, endKnown = ro.epochEnd(c, cb.epoch)
		}
		if sub := c.subsetFor(cb.epoch); sub != nil {
			if state := ro.pick(c, cb, sub, end, endKnown); state != pastEnd {
				return state
			}
			continue // none of its subset left in this epoch: cb.start is its end
		}
		cb.end = cb.start + uint64(c.batchSize)
		if endKnown {
			cb.end = min(cb.end, end)
		}
		// Where the epoch's end is not known yet, it cannot come before
		// what is published: wait for more.
		if cb.end > s.buf.samples {
			return unknownYet
		}
		return known
	}
}

// pick fills cb, which starts at cb.start in c's own epoch cb.epoch
// (ending at end, if endKnown), with the next samples of sub: a full
// batch, or what is left of the epoch. It says known when cb is done,
// unknownYet when more must be published first, and pastEnd when the
// rest of the epoch holds none of sub (cb.start is then its end).
// Callers hold Store.mu.
func (ro *roster) pick(c *consumer, cb *cbatch, sub *Subset, end uint64, endKnown bool) resolved {
	s := ro.s
	limit := s.buf.samples
	if endKnown {
		limit = min(limit, end)
	}
	cb.picks = cb.picks[:0]
	got := 0
	x := cb.start
	for x < limit && got < c.batchSize {
		b := s.buf.batchAt(x)
		if b == nil { // freed: the rest of a stitched epoch that holds none of sub (noneOf)
			x = s.buf.nextHeld(x, limit)
			continue
		}
		if len(b.info.Indices) != b.info.Samples {
			break // without indices (refused at SetSubset)
		}
		to := min(limit, b.end())
		for ; x < to && got < c.batchSize; x++ {
			if !sub.Has(int(b.info.Indices[x-b.first])) {
				continue
			}
			if n := len(cb.picks); n > 0 && cb.picks[n-1].to == x {
				cb.picks[n-1].to++
			} else {
				cb.picks = append(cb.picks, span{x, x + 1})
			}
			got++
		}
	}
	cb.end = x
	switch {
	case got == c.batchSize, endKnown && x == end && got > 0:
		return known
	case endKnown && x == end:
		cb.start = end
		return pastEnd
	case got > 0 && c.allowShort:
		c.shortBatches++
		return known
	}
	return unknownYet
}

// stuck: c's batch local, its next to compute, cannot complete: the
// producer waits for room that only c's reading can make (c needs the
// oldest batch held, so nothing after it can go either), and what is
// held of c's subset falls short of a batch. Then c gets what is held
// as a short batch instead of a deadlock: its epoch stays exact, that
// batch is smaller. callers hold Store.mu.
func (ro *roster) stuck(c *consumer, local uint64) bool {
	s := ro.s
	// The producer's wait flag lasts until it runs again: the room it
	// waits for may have come already.
	if !s.buf.stats.producerWaiting || s.buf.stats.lingerBlocked || s.buf.fits(s.buf.stats.waitingFor) || local != c.batches.computed() {
		return false
	}
	b := s.buf.held[s.buf.oldestHeld()]
	return b != nil && ro.needs(c, b)
}

// finished reports whether c has no batch j: past its last epoch, or past
// any batch number the dataset allows. callers hold Store.mu.
func (ro *roster) pastTheEnd(c *consumer, j uint64) bool {
	s := ro.s
	if s.cfg.Epochs == 0 {
		return false
	}
	if s.cfg.Samples > 0 {
		perEpoch := (s.cfg.Samples + c.batchSize - 1) / c.batchSize
		if j >= uint64(s.cfg.Epochs*perEpoch) {
			return true
		}
	}
	last, ok := c.batches.last()
	if !ok || j < c.batches.computed() {
		return false
	}
	if last.epoch < s.cfg.Epochs-1 {
		return false
	}
	end, known := ro.epochEnd(c, last.epoch)
	return known && last.end >= end
}

// Lookup returns consumer name's batch number local, blocking until it can
// be read. It fails at once with ErrNotFound when the consumer already
// consumed it or it can never exist, and with ErrInterrupted when ctx ends.
// caller is remembered so that the Open that follows is charged to name.
func (s *Store) Lookup(ctx context.Context, name string, local uint64, caller CallerID) (Ref, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.ros.consumers[name]
	if !ok {
		return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, ErrNoConsumer)
	}
	if !c.started {
		if err := s.ros.decide(c); err != nil {
			return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, err)
		}
	}
	c.caller = caller
	for {
		switch {
		case s.closed:
			return Ref{}, ErrClosed
		case c.left:
			return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, ErrNoConsumer)
		case c.evicted != "":
			return Ref{}, fmt.Errorf("lookup %s/%d: %s: %w", name, local, c.evicted, ErrEvicted)
		case s.ros.isDone(c, local):
			return Ref{}, fmt.Errorf("lookup %s/%d: consumed: %w", name, local, ErrNotFound)
		case s.ros.pastTheEnd(c, local):
			return Ref{}, fmt.Errorf("lookup %s/%d: past the consumer's last epoch: %w", name, local, ErrNotFound)
		}
		cb, state := s.ros.resolve(c, local)
		if state == unknownYet && s.ros.stuck(c, local) {
			c.allowShort = true
			cb, state = s.ros.resolve(c, local)
			c.allowShort = false
		}
		switch {
		case state == pastEnd && errors.Is(s.failure, ErrNoSamples):
			return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, s.failure)
		case state == pastEnd:
			return Ref{}, fmt.Errorf("lookup %s/%d: past the consumer's last epoch: %w", name, local, ErrNotFound)
		case state == known:
			ref, err := s.ros.ref(c, local, cb)
			if err != nil {
				return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, err)
			}
			if ref.Direct {
				s.buf.held[ref.Seq].lookups[caller] = batchKey{c, local}
			}
			return ref, nil
		}
		if s.failure != nil {
			return Ref{}, fmt.Errorf("lookup %s/%d: %w: %w", name, local, ErrProducerFailed, s.failure)
		}
		if s.finished {
			return Ref{}, fmt.Errorf("lookup %s/%d: the producer has stopped: %w", name, local, ErrNotFound)
		}
		if c.deadlockMapped && (!s.buf.stats.lingerBlocked || s.buf.fits(s.buf.stats.waitingFor)) {
			s.ev.endMappedDeadlocks()
			s.broadcast() // the producer may go on now
		}
		if c.deadlock != "" {
			return Ref{}, fmt.Errorf("lookup %s/%d: %s: %w", name, local, c.deadlock, ErrDeadlock)
		}
		if err := s.ros.waitFor(ctx, c); err != nil {
			return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, err)
		}
	}
}

// decide starts c at its first lookup: one that set no subset reads all
// of the data from here on, if that leaves every decided consumer's
// batch within the buffer (else ErrDeadlock, and it stays undecided: it
// may set a subset, or try again once others left). callers hold Store.mu.
func (ro *roster) decide(c *consumer) error {
	s := ro.s
	if !c.decided && c.subset == nil && !s.cfg.Unordered {
		if err := s.dem.combinedNeed(c, nil); err != nil {
			return fmt.Errorf("reading all %d samples: %w: %w", s.cfg.Samples, err, ErrDeadlock)
		}
	}
	c.started = true
	if !c.decided {
		c.decided = true
		if s.dem.readable(c) {
			s.dem.wantsChanged()
		} else {
			s.dem.settle(c)
		}
	}
	return nil
}

func (ro *roster) isDone(c *consumer, j uint64) bool {
	if j < c.low {
		return true
	}
	_, ok := c.done[j]
	return ok
}

// ref describes c's batch j. callers hold Store.mu.
func (ro *roster) ref(c *consumer, j uint64, cb cbatch) (Ref, error) {
	s := ro.s
	ref := Ref{Consumer: c.id, Local: j, Epoch: cb.epoch, Index: cb.index, Samples: int(cb.samples())}
	var err error
	if ref.Pieces, ref.Time, err = ro.pieces(cb); err != nil {
		return Ref{}, err
	}
	if len(ref.Pieces) == 1 {
		p, b := ref.Pieces[0], s.buf.held[ref.Pieces[0].Seq]
		if p.From == 0 && p.To == b.info.Samples && b.info.Epoch == cb.epoch && b.info.Index == cb.index {
			ref.Direct, ref.Seq, ref.Size = true, b.seq, b.blob.Size()
			return ref, nil
		}
	}
	ref.Size = s.cfg.Measure(ref.Pieces)
	return ref, nil
}

// pieces are the runs of producer batches that make cb up, and when the
// newest of them was published. callers hold Store.mu.
func (ro *roster) pieces(cb cbatch) ([]Piece, time.Time, error) {
	s := ro.s
	var pieces []Piece
	var newest time.Time
	for _, sp := range cb.spans() {
		for x := sp.from; x < sp.to; {
			b := s.buf.batchAt(x)
			if b == nil {
				return nil, newest, fmt.Errorf("sample %d no longer held: %w", x, ErrNotFound)
			}
			to := min(sp.to, b.end())
			pieces = append(pieces, Piece{Seq: b.seq, From: int(x - b.first), To: int(to - b.first), Total: b.info.Samples, Blob: b.blob})
			if b.at.After(newest) {
				newest = b.at
			}
			x = to
		}
	}
	return pieces, newest, nil
}

// waitFor is wait with the consumer's waiting state and time kept.
func (ro *roster) waitFor(ctx context.Context, c *consumer) error {
	s := ro.s
	if c.waiting == 0 {
		c.waitSince = time.Now()
	}
	c.waiting++
	err := s.wait(ctx)
	c.waiting--
	if c.waiting == 0 {
		c.waitTotal += time.Since(c.waitSince)
	}
	return err
}

// Pending lists the batches name can read now and has not consumed, in
// order: what `ls` shows.
func (s *Store) Pending(name string) ([]Ref, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.ros.consumers[name]
	if !ok {
		return nil, fmt.Errorf("list %s: %w", name, ErrNoConsumer)
	}
	if !c.active() {
		return nil, nil
	}
	var refs []Ref
	for j := c.low; ; j++ {
		if s.ros.pastTheEnd(c, j) {
			break
		}
		cb, state := s.ros.resolve(c, j)
		if state != known {
			break
		}
		if s.ros.isDone(c, j) {
			continue
		}
		ref, err := s.ros.ref(c, j, cb)
		if err != nil {
			break
		}
		refs = append(refs, ref)
	}
	return refs, nil
}
