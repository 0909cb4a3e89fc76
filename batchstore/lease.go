package batchstore

import (
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/tsock/tsock/batchstore/internal/plan"
)

// Lease is one open handle on one consumer's batch. The producer batches it
// spans stay in memory until every lease on them is released.
type Lease struct {
	s        *Store
	c        *consumer
	rk       *rank  // the rank charged, for a rank's batch (c is its group)
	round    uint64 // c's round that rank batch j is a share of
	j        uint64
	batches  []*batch
	released bool
}

// Open takes a lease on producer batch seq, served as a shared file, for
// the consumer that caller last looked it up as.
func (s *Store) Open(seq uint64, caller CallerID) (*Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := s.heldBatch("open", seq)
	if err != nil {
		return nil, err
	}
	k, err := b.opener(caller)
	if err != nil {
		return nil, fmt.Errorf("open batch %d: %w", seq, err)
	}
	if k.rk != nil {
		return s.ros.leaseShare(k.c, k.rk, k.j)
	}
	return s.ros.lease(k.c, k.j)
}

// opener is whose batch an open by caller takes. The kernel looks a name
// up before it opens it (entry timeouts are zero), so caller's own lookup
// says; an open without one (a reopen through /proc/self/fd, a forked
// worker's inherited path) goes to the consumer that looked the batch up,
// where only one did, and is refused where several did: charged to the
// wrong one, it would consume that consumer's batch, whose own reads
// would then find its stream ended early.
func (b *batch) opener(caller CallerID) (batchKey, error) {
	if k, ok := b.lookups[caller]; ok {
		return k, nil
	}
	var k batchKey
	found := false
	for _, l := range b.lookups {
		switch {
		case !found:
			k, found = l, true
		case l != k:
			return batchKey{}, fmt.Errorf("opened without a lookup, and %s and %s both looked it up: open it by its path (%w)", k.name(), l.name(), ErrAmbiguous)
		}
	}
	if !found {
		return batchKey{}, fmt.Errorf("no consumer looked it up: %w", ErrNotFound)
	}
	return k, nil
}

// Hold takes a lease on producer batch seq that no consumer is charged
// with: the file system's own read-ahead of a batch a consumer has looked
// up. It keeps the batch's bytes until Release and consumes nothing.
func (s *Store) Hold(seq uint64) (*Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := s.heldBatch("hold", seq)
	if err != nil {
		return nil, err
	}
	b.leases++
	return &Lease{s: s, batches: []*batch{b}}, nil
}

// heldBatch is producer batch seq while the buffer holds it; verb names
// the caller in the error. Callers hold s.mu.
func (s *Store) heldBatch(verb string, seq uint64) (*batch, error) {
	if s.closed {
		return nil, ErrClosed
	}
	b := s.buf.held[seq]
	if b == nil {
		return nil, fmt.Errorf("%s batch %d: %w", verb, seq, ErrNotFound)
	}
	return b, nil
}

// Holds says whether the buffer still holds producer batch seq: a
// consumer may still read it.
func (s *Store) Holds(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.held[seq] != nil
}

// OpenBatch takes a lease on name's batch local (a re-batched file).
func (s *Store) OpenBatch(name string, local uint64) (*Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if _, _, isRank := splitRank(name); isRank {
		c, rk, err := s.ros.findRank(name)
		if err != nil {
			return nil, fmt.Errorf("open %w", err)
		}
		return s.ros.leaseShare(c, rk, local)
	}
	c, ok := s.ros.consumers[name]
	if !ok {
		return nil, fmt.Errorf("open %s/%d: %w", name, local, ErrNoConsumer)
	}
	return s.ros.lease(c, local)
}

// lease pins the producer batches of c's batch j. callers hold Store.mu.
func (ro *roster) lease(c *consumer, j uint64) (*Lease, error) {
	s := ro.s
	cb, ok := c.batches.Get(j)
	if !ok || !c.active() || ro.isDone(c, j) {
		return nil, fmt.Errorf("open %s/%d: %w", c.name, j, ErrNotFound)
	}
	l := &Lease{s: s, c: c, j: j}
	for x := cb.Start; x < cb.End; {
		b := s.buf.batchAt(x)
		if b == nil {
			return nil, fmt.Errorf("open %s/%d: sample %d no longer held: %w", c.name, j, x, ErrNotFound)
		}
		l.batches = append(l.batches, b)
		x = b.end()
	}
	for _, b := range l.batches {
		b.leases++
	}
	c.handles[j]++
	c.progress = time.Now()
	return l, nil
}

// Blob is the bytes of the lease's first producer batch (its only one for
// a shared batch); valid until Release.
func (l *Lease) Blob() Blob { return l.batches[0].blob }

// Blobs maps each producer batch the lease spans to its bytes.
func (l *Lease) Blobs() map[uint64]Blob {
	m := make(map[uint64]Blob, len(l.batches))
	for _, b := range l.batches {
		m[b.seq] = b.blob
	}
	return m
}

// Consumer is the name of the consumer the lease is charged to ("" for a
// Hold).
func (l *Lease) Consumer() string {
	switch {
	case l.rk != nil:
		return RankName(l.c.name, l.rk.n)
	case l.c == nil:
		return ""
	}
	return l.c.name
}

// Local is the consumer's number of the batch.
func (l *Lease) Local() uint64 { return l.j }

// Release ends the lease. The consumer's last release of a batch consumes
// it; the last release by anyone may free the producer batches. Safe to
// call twice.
func (l *Lease) Release() {
	s := l.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.released {
		return
	}
	l.released = true
	for _, b := range l.batches {
		b.leases--
	}
	switch {
	case l.rk != nil: // a rank's: its group's round stays open until every rank is done
		l.rk.handles[l.j]--
		if l.rk.handles[l.j] <= 0 {
			delete(l.rk.handles, l.j)
			s.ros.consumeShare(l.c, l.rk, l.j)
		}
		l.c.handles[l.round]--
		if l.c.handles[l.round] <= 0 {
			delete(l.c.handles, l.round)
		}
	case l.c != nil: // a consumer's, not a Hold
		l.c.handles[l.j]--
		if l.c.handles[l.j] <= 0 {
			delete(l.c.handles, l.j)
			s.ros.consume(l.c, l.j)
		}
	}
	for _, b := range l.batches {
		s.buf.maybeFree(b)
	}
	s.broadcast()
}

// consume records that c is done with its batch j. callers hold Store.mu.
func (ro *roster) consume(c *consumer, j uint64) {
	s := ro.s
	cb, ok := c.batches.Get(j)
	if !ok || !c.active() || ro.isDone(c, j) {
		return
	}
	c.progress = time.Now()
	ro.counted(&c.readStats, cb)
	c.low = markDone(c.done, c.low, j)
	c.batches.DropBelow(c.low)
	done := ro.pastTheEnd(c, c.low)
	if done { // read everything: its split binds no more epochs
		delete(ro.splits, c.id)
		s.dem.wantsChanged()
	}
	// What c's reading can free: the batches it has now passed (it needs
	// them no more, and they are passed), or, once it has read everything,
	// any. Another batch's state (its leases, passed, every other
	// consumer's needs) is what it was: asking of it again, for every
	// consumer, cost 200 consumers a third more per batch.
	mark := ro.lowSample(c)
	for b := range s.buf.batches() {
		if b.end() <= mark {
			b.passed = true
			if !done {
				s.buf.maybeFree(b)
			}
		}
	}
	if done {
		s.buf.freeWhatWeCan()
	}
	s.broadcast()
}

// needs reports whether active consumer c may still read samples of b
// (plan.Needs). Callers hold Store.mu.
func (ro *roster) needs(c *consumer, b *batch) bool {
	if !c.active() {
		return false
	}
	r := ro.reader(c)
	return plan.Needs(ro.s.stream(), &r, b.info.Epoch, b.first, b.end())
}

// all are the consumers, in no order.
func (ro *roster) all() iter.Seq[*consumer] {
	return func(yield func(*consumer) bool) {
		for _, c := range ro.consumers {
			if !yield(c) {
				return
			}
		}
	}
}

// splitOf is c's split, nil if it has none.
func (ro *roster) splitOf(c *consumer) *split { return ro.splits[c.id] }

// dropSplit forgets c's split.
func (ro *roster) dropSplit(c *consumer) { delete(ro.splits, c.id) }

// anyNeeds says whether some active consumer has samples of b still to
// read. Callers hold Store.mu.
func (ro *roster) anyNeeds(b *batch) bool {
	// The consumer found needing b last time most likely still does (the
	// slowest reader): asked first, a batch's last releases cost one
	// question each rather than a walk of every consumer that has read it
	// (with 200 consumers, the walks were a third of the store's time).
	if c := ro.neededBy[b.seq]; c != nil && ro.needs(c, b) {
		return true
	}
	for _, c := range ro.consumers {
		if ro.needs(c, b) {
			ro.neededBy[b.seq] = c
			return true
		}
	}
	delete(ro.neededBy, b.seq)
	return false
}

// lowSample is the first sample c may still read. Callers hold Store.mu.
func (ro *roster) lowSample(c *consumer) uint64 {
	r := ro.reader(c)
	return plan.LowSample(ro.s.stream(), &r)
}

// Unlink makes name give up its batch local: consumed now, or at the last
// release if it has the batch open.
func (s *Store) Unlink(name string, local uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, _, isRank := splitRank(name); isRank {
		return s.ros.unlinkShare(name, local)
	}
	c, ok := s.ros.consumers[name]
	if !ok {
		return fmt.Errorf("unlink %s/%d: %w", name, local, ErrNoConsumer)
	}
	if c.evicted != "" {
		return fmt.Errorf("unlink %s/%d: %s: %w", name, local, c.evicted, ErrEvicted)
	}
	if _, ok := c.batches.Get(local); !ok || s.ros.isDone(c, local) {
		return fmt.Errorf("unlink %s/%d: %w", name, local, ErrNotFound)
	}
	if c.handles[local] == 0 {
		s.ros.consume(c, local)
	}
	return nil
}

// leaseShare pins the producer batches of rank rk's batch j (a share of
// group c's round). callers hold Store.mu.
func (ro *roster) leaseShare(c *consumer, rk *rank, j uint64) (*Lease, error) {
	s := ro.s
	share, ok := ro.shareOf(c, rk, j)
	if !ok || !c.active() || rk.left || rk.isDone(j) {
		return nil, fmt.Errorf("open %s/%d: %w", RankName(c.name, rk.n), j, ErrNotFound)
	}
	l := &Lease{s: s, c: c, rk: rk, round: c.group.rounds[j-c.group.base], j: j}
	for _, sp := range share.Spans() {
		for x := sp.From; x < sp.To; {
			b := s.buf.batchAt(x)
			if b == nil {
				return nil, fmt.Errorf("open %s/%d: sample %d no longer held: %w", RankName(c.name, rk.n), j, x, ErrNotFound)
			}
			if !slices.Contains(l.batches, b) {
				l.batches = append(l.batches, b)
			}
			x = min(sp.To, b.end())
		}
	}
	for _, b := range l.batches {
		b.leases++
	}
	rk.handles[j]++
	c.handles[l.round]++
	rk.progress = time.Now()
	c.progress = time.Now()
	return l, nil
}

// unlinkShare is Unlink for a rank. callers hold Store.mu.
func (ro *roster) unlinkShare(name string, local uint64) error {
	c, rk, err := ro.findRank(name)
	if err != nil {
		return fmt.Errorf("unlink %w", err)
	}
	if c.evicted != "" {
		return fmt.Errorf("unlink %s/%d: %s: %w", name, local, c.evicted, ErrEvicted)
	}
	if _, ok := ro.shareOf(c, rk, local); !ok || rk.isDone(local) {
		return fmt.Errorf("unlink %s/%d: %w", name, local, ErrNotFound)
	}
	if rk.handles[local] == 0 {
		ro.consumeShare(c, rk, local)
	}
	return nil
}

// counted adds consumed batch cb to what a reader read. callers hold
// Store.mu.
func (ro *roster) counted(rs *readStats, cb plan.Batch) {
	rs.batchesRead++
	rs.samplesRead += cb.Samples()
	if pieces, _, err := ro.pieces(cb); err == nil {
		rs.bytesRead += ro.s.cfg.Measure(pieces)
	}
	if cb.Epoch != rs.lastEpoch {
		rs.epochSamples = 0
	}
	rs.epochSamples += cb.Samples()
	rs.lastEpoch = cb.Epoch
}

// markDone records batch j consumed in done and returns the new lowest
// unconsumed batch number from low: consumption may run out of order.
func markDone(done map[uint64]struct{}, low, j uint64) uint64 {
	done[j] = struct{}{}
	for {
		if _, ok := done[low]; !ok {
			return low
		}
		delete(done, low)
		low++
	}
}
