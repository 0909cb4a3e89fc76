package batchstore

import (
	"fmt"
	"sort"
	"time"
)

// Lease is one open handle on a batch, charged to one consumer. The batch's
// memory stays valid until every lease on it is released.
type Lease struct {
	s        *Store
	c        *consumer
	b        *batch
	released bool
}

// Open takes a lease on batch seq for the consumer that caller last looked
// it up as. Without such a lookup (a path the kernel did not revalidate)
// the lease goes to the first consumer, by name, that still has it pending.
func (s *Store) Open(seq uint64, caller CallerID) (*Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	b := s.held[seq]
	if b == nil {
		return nil, fmt.Errorf("open batch %d: %w", seq, ErrNotFound)
	}
	c := b.lookups[caller]
	if c == nil {
		c = firstPending(b)
	}
	if c == nil {
		return nil, fmt.Errorf("open batch %d: consumed by every consumer: %w", seq, ErrNotFound)
	}
	if _, ok := b.pending[c]; !ok {
		return nil, fmt.Errorf("open %s/%d: consumed: %w", c.name, seq-c.base, ErrNotFound)
	}
	c.handles[seq]++
	c.progress = time.Now()
	b.leases++
	return &Lease{s: s, c: c, b: b}, nil
}

func firstPending(b *batch) *consumer {
	var names []string
	byName := make(map[string]*consumer, len(b.pending))
	for c := range b.pending {
		names = append(names, c.name)
		byName[c.name] = c
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	return byName[names[0]]
}

// Blob is the batch's bytes; valid until Release.
func (l *Lease) Blob() Blob { return l.b.blob }

// Consumer is the name of the consumer the lease is charged to.
func (l *Lease) Consumer() string { return l.c.name }

// Seq is the batch's global sequence number.
func (l *Lease) Seq() uint64 { return l.b.seq }

// Release ends the lease. The consumer's last release of a batch consumes
// it; the last release by anyone may free it. Safe to call twice.
func (l *Lease) Release() {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.released {
		return
	}
	l.released = true
	l.b.leases--
	l.c.handles[l.b.seq]--
	if l.c.handles[l.b.seq] > 0 {
		return
	}
	delete(l.c.handles, l.b.seq)
	s.consume(l.c, l.b)
	s.maybeFree(l.b)
	s.broadcast()
}
