package batchstore

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"time"
)

// CallerID names the thread that made a request, so an open can be charged
// to the consumer whose directory that thread looked the batch up in.
type CallerID uint32

type consumer struct {
	name        string
	base        uint64 // global seq of this consumer's batch 0
	pos         uint64 // lowest global seq not yet consumed
	done        map[uint64]struct{}
	handles     map[uint64]int // open leases per seq
	joined      time.Time
	joinedEpoch int
	left        bool
	evicted     string    // why it was evicted; "" while it is not
	progress    time.Time // when it last joined, opened or consumed
	stalled     time.Time // since when it holds back a full buffer without progress
	straggling  time.Time // since when it holds the oldest batch of a full buffer
	batchesRead uint64
	bytesRead   int64
	samplesRead uint64
	lastEpoch   int // epoch of the last batch consumed, -1 before any
	waiting     int // lookups blocked right now
	waitTotal   time.Duration
	waitSince   time.Time
}

// active: still reading; a consumer that left or was evicted has nothing
// pending and gets nothing new.
func (c *consumer) active() bool { return !c.left && c.evicted == "" }

// markConsumed records seq and moves the position past every consumed seq.
func (c *consumer) markConsumed(seq uint64) {
	c.done[seq] = struct{}{}
	for {
		if _, ok := c.done[c.pos]; !ok {
			return
		}
		delete(c.done, c.pos)
		c.pos++
	}
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// ValidName reports whether name may name a consumer: 1–64 characters of
// letters, digits, '_', '.', '-', not starting with '.' or '-'.
func ValidName(name string) bool { return validName.MatchString(name) }

// Join adds a consumer. Its batch 0 is the oldest batch from which every
// later batch is still held, so its numbering never has holes.
func (s *Store) Join(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("join %q: %w", name, ErrBadName)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if _, ok := s.consumers[name]; ok {
		return fmt.Errorf("join %q: %w", name, ErrExists)
	}
	base := s.nextSeq
	for base > 0 && s.held[base-1] != nil {
		base--
	}
	c := &consumer{
		name: name, base: base, pos: base,
		done: make(map[uint64]struct{}), handles: make(map[uint64]int),
		joined: time.Now(), lastEpoch: -1, joinedEpoch: -1, progress: time.Now(),
	}
	for seq := base; seq < s.nextSeq; seq++ {
		b := s.held[seq]
		b.pending[c] = struct{}{}
		if c.joinedEpoch < 0 {
			c.joinedEpoch = b.info.Epoch
		}
	}
	s.consumers[name] = c
	s.broadcast()
	return nil
}

// Leave removes a consumer and releases everything it held back. Leases it
// still has open stay valid until they are released.
func (s *Store) Leave(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.consumers[name]
	if !ok {
		return fmt.Errorf("leave %q: %w", name, ErrNoConsumer)
	}
	c.left = true
	delete(s.consumers, name)
	s.dropPending(c)
	return nil
}

// dropPending stops c from holding any batch back. Callers hold s.mu.
func (s *Store) dropPending(c *consumer) {
	for _, b := range s.held {
		delete(b.pending, c)
		for caller, who := range b.lookups {
			if who == c {
				delete(b.lookups, caller)
			}
		}
		s.maybeFree(b)
	}
	s.broadcast()
}

// Consumers lists the names of joined consumers, sorted.
func (s *Store) Consumers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.consumers))
	for name := range s.consumers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// HasConsumer reports whether name is joined.
func (s *Store) HasConsumer(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.consumers[name]
	return ok
}

// Ref identifies one batch as one consumer sees it.
type Ref struct {
	Seq   uint64 // global sequence number: the same batch has the same Seq for everyone
	Local uint64 // the consumer's own number for it
	Size  int64
	Info  Info
	Time  time.Time // when it was published
}

func (s *Store) ref(c *consumer, b *batch) Ref {
	return Ref{Seq: b.seq, Local: b.seq - c.base, Size: b.blob.Size(), Info: b.info, Time: b.at}
}

// Lookup returns consumer name's batch number local, blocking until it is
// published. It fails at once with ErrNotFound when the consumer already
// consumed it or it can never exist, and with ErrInterrupted when ctx ends.
// caller is remembered so that the Open that follows is charged to name.
func (s *Store) Lookup(ctx context.Context, name string, local uint64, caller CallerID) (Ref, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.consumers[name]
	if !ok {
		return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, ErrNoConsumer)
	}
	seq := c.base + local
	if seq < c.base { // overflow
		return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, ErrNotFound)
	}
	for {
		switch {
		case s.closed:
			return Ref{}, ErrClosed
		case c.left:
			return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, ErrNoConsumer)
		case c.evicted != "":
			return Ref{}, fmt.Errorf("lookup %s/%d: %s: %w", name, local, c.evicted, ErrEvicted)
		case seq < s.nextSeq:
			b := s.held[seq]
			if b == nil {
				return Ref{}, fmt.Errorf("lookup %s/%d: consumed: %w", name, local, ErrNotFound)
			}
			if _, ok := b.pending[c]; !ok {
				return Ref{}, fmt.Errorf("lookup %s/%d: consumed: %w", name, local, ErrNotFound)
			}
			b.lookups[caller] = c
			return s.ref(c, b), nil
		case seq >= s.maxSeq:
			return Ref{}, fmt.Errorf("lookup %s/%d: past the end: %w", name, local, ErrNotFound)
		}
		if err := s.waitFor(ctx, c); err != nil {
			return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, err)
		}
	}
}

// waitFor is wait with the consumer's waiting state and time kept.
func (s *Store) waitFor(ctx context.Context, c *consumer) error {
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

// Pending lists the batches name has not consumed yet, in order.
func (s *Store) Pending(name string) ([]Ref, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.consumers[name]
	if !ok {
		return nil, fmt.Errorf("list %s: %w", name, ErrNoConsumer)
	}
	var refs []Ref
	for _, seq := range s.heldSeqs() {
		b := s.held[seq]
		if _, ok := b.pending[c]; ok {
			refs = append(refs, s.ref(c, b))
		}
	}
	return refs, nil
}

// Unlink makes name give up its batch local: consumed now, or at the last
// release if it has the batch open.
func (s *Store) Unlink(name string, local uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.consumers[name]
	if !ok {
		return fmt.Errorf("unlink %s/%d: %w", name, local, ErrNoConsumer)
	}
	if c.evicted != "" {
		return fmt.Errorf("unlink %s/%d: %s: %w", name, local, c.evicted, ErrEvicted)
	}
	b := s.held[c.base+local]
	if b == nil {
		return fmt.Errorf("unlink %s/%d: %w", name, local, ErrNotFound)
	}
	if _, ok := b.pending[c]; !ok {
		return fmt.Errorf("unlink %s/%d: %w", name, local, ErrNotFound)
	}
	if c.handles[b.seq] == 0 {
		s.consume(c, b)
	}
	return nil
}

// consume records that c is done with b. Callers hold s.mu.
func (s *Store) consume(c *consumer, b *batch) {
	if _, ok := b.pending[c]; !ok || !c.active() {
		return
	}
	c.progress = time.Now()
	delete(b.pending, c)
	b.consumed++
	c.batchesRead++
	c.bytesRead += b.blob.Size()
	c.samplesRead += uint64(b.info.Samples)
	c.lastEpoch = b.info.Epoch
	c.markConsumed(b.seq)
	s.maybeFree(b)
	s.broadcast()
}
