package batchstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tsock/tsock/batchstore/internal/plan"
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

// resolve computes c's batch j if it can be known yet: its samples are
// published and where its epoch ends is known (plan.Next decides; the
// batches are kept here). Callers hold Store.mu.
func (ro *roster) resolve(c *consumer, j uint64) (plan.Batch, plan.Resolved) {
	s := ro.s
	if !c.startKnown {
		start, ok := s.stream().EpochStart(c.joinEpoch)
		if !ok {
			return plan.Batch{}, plan.UnknownYet
		}
		c.start, c.startKnown = start, true
	}
	r := ro.reader(c)
	for c.batches.Computed() <= j {
		cb := plan.Batch{Start: c.start}
		if prev, ok := c.batches.Last(); ok {
			cb.Start, cb.Epoch, cb.Index = prev.End, prev.Epoch, prev.Index+1
		}
		state, short := plan.Next(s.stream(), r, &cb)
		if state != plan.Known {
			return plan.Batch{}, state
		}
		if short {
			c.shortBatches++
		}
		c.batches.Add(cb)
	}
	cb, ok := c.batches.Get(j)
	if !ok {
		return plan.Batch{}, plan.UnknownYet
	}
	return cb, plan.Known
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
	if !s.buf.waitsForReaders() || local != c.batches.Computed() {
		return false
	}
	b := s.buf.oldest()
	return b != nil && ro.needs(c, b)
}

// pastTheEnd reports whether c has no batch j: past its last epoch, or
// past any batch number the dataset allows. callers hold Store.mu.
func (ro *roster) pastTheEnd(c *consumer, j uint64) bool {
	s := ro.s
	last, ok := c.batches.Last()
	return plan.PastTheEnd(s.stream(), ro.reader(c), s.cfg.Samples, j, last, ok, c.batches.Computed())
}

// Lookup returns consumer name's batch number local, blocking until it can
// be read. It fails at once with ErrNotFound when the consumer already
// consumed it or it can never exist, and with ErrInterrupted when ctx ends.
// caller is remembered so that the Open that follows is charged to name.
func (s *Store) Lookup(ctx context.Context, name string, local uint64, caller CallerID) (Ref, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, _, isRank := splitRank(name); isRank {
		return s.lookupRank(ctx, name, local, caller)
	}
	c, ok := s.ros.consumers[name]
	if !ok {
		return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, ErrNoConsumer)
	}
	if c.group != nil {
		return Ref{}, fmt.Errorf("lookup %s/%d: a group: its ranks read its batches: %w", name, local, ErrNotFound)
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
		if state == plan.UnknownYet && s.ros.stuck(c, local) {
			if s.ev.failsShort(c) {
				continue // failed: the checks above say so
			}
			c.allowShort = true
			cb, state = s.ros.resolve(c, local)
			c.allowShort = false
		}
		switch {
		case state == plan.PastEnd && errors.Is(s.failure, ErrNoSamples):
			return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, s.failure)
		case state == plan.PastEnd:
			return Ref{}, fmt.Errorf("lookup %s/%d: past the consumer's last epoch: %w", name, local, ErrNotFound)
		case state == plan.Known:
			ref, err := s.ros.ref(c, local, cb)
			if err != nil {
				return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, err)
			}
			if ref.Direct {
				s.buf.held[ref.Seq].lookups[caller] = batchKey{c: c, j: local}
			}
			return ref, nil
		}
		if s.failure != nil {
			return Ref{}, fmt.Errorf("lookup %s/%d: %w: %w", name, local, ErrProducerFailed, s.failure)
		}
		if s.finished {
			return Ref{}, fmt.Errorf("lookup %s/%d: the producer has stopped: %w", name, local, ErrNotFound)
		}
		if c.deadlockMapped && !s.buf.waitsForUnmaps() {
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
func (ro *roster) ref(c *consumer, j uint64, cb plan.Batch) (Ref, error) {
	s := ro.s
	ref := Ref{Consumer: c.id, Local: j, Epoch: cb.Epoch, Index: cb.Index, Samples: int(cb.Samples())}
	var err error
	if ref.Pieces, ref.Time, err = ro.pieces(cb); err != nil {
		return Ref{}, err
	}
	if len(ref.Pieces) == 1 {
		p, b := ref.Pieces[0], s.buf.batch(ref.Pieces[0].Seq)
		if p.From == 0 && p.To == b.info.Samples && b.info.Epoch == cb.Epoch && b.info.Index == cb.Index {
			ref.Direct, ref.Seq, ref.Size = true, b.seq, b.blob.Size()
			return ref, nil
		}
	}
	ref.Size = s.cfg.Measure(ref.Pieces)
	return ref, nil
}

// pieces are the runs of producer batches that make cb up, and when the
// newest of them was published. callers hold Store.mu.
func (ro *roster) pieces(cb plan.Batch) ([]Piece, time.Time, error) {
	s := ro.s
	var pieces []Piece
	var newest time.Time
	for _, sp := range cb.Spans() {
		for x := sp.From; x < sp.To; {
			b := s.buf.batchAt(x)
			if b == nil {
				return nil, newest, fmt.Errorf("sample %d no longer held: %w", x, ErrNotFound)
			}
			to := min(sp.To, b.end())
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
	if _, _, isRank := splitRank(name); isRank {
		return s.ros.pendingShares(name)
	}
	c, ok := s.ros.consumers[name]
	if !ok {
		return nil, fmt.Errorf("list %s: %w", name, ErrNoConsumer)
	}
	if !c.active() || c.group != nil {
		return nil, nil
	}
	var refs []Ref
	for j := c.low; ; j++ {
		if s.ros.pastTheEnd(c, j) {
			break
		}
		cb, state := s.ros.resolve(c, j)
		if state != plan.Known {
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
