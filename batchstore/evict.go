package batchstore

import (
	"context"
	"fmt"
	"time"

	"github.com/dustin/go-humanize"
)

// evictor applies the eviction rules (evict.go); it has no state of its
// own beyond the consumers' clocks. Guarded by Store.mu.
type evictor struct {
	s *Store
}

// Straggler is what happens to a consumer that holds the whole buffer.
type Straggler string

// The straggler policies.
const (
	// Block: everyone waits for the slowest live consumer; the buffer
	// bounds how far ahead the others get.
	Block Straggler = "block"
	// Evict: a consumer that holds the oldest batch of a full buffer
	// while others wait for new batches, for longer than the timeout, is
	// evicted, so one slow trial cannot slow the rest.
	Evict Straggler = "evict"
)

// ParseStraggler reads a straggler policy: block or evict.
func ParseStraggler(s string) (Straggler, error) {
	switch Straggler(s) {
	case Block, Evict:
		return Straggler(s), nil
	}
	return "", fmt.Errorf("straggler policy %q: want block or evict", s)
}

// Eviction configures Watch.
type Eviction struct {
	// Timeout: a consumer with no open file, no blocked lookup and no
	// progress for this long while it holds back a full buffer is
	// evicted (a crashed process: the kernel released its files).
	Timeout time.Duration
	// Straggler applies to consumers that are alive but too slow.
	Straggler Straggler
}

// Watch evicts stale consumers until ctx ends, checking a few times per
// timeout. The kernel's release of a dead process's files is the only
// signal: there is no heartbeat.
func (s *Store) Watch(ctx context.Context, e Eviction) {
	if e.Timeout <= 0 {
		return
	}
	// At least a millisecond: a tick of Timeout/4 is zero for a timeout
	// of a few nanoseconds, which NewTicker refuses with a panic.
	t := time.NewTicker(max(min(e.Timeout/4, time.Second), time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.ev.evictStale(now, e)
		}
	}
}

// evictStale applies the eviction rules at time now and returns who was
// evicted.
func (ev *evictor) evictStale(now time.Time, e Eviction) []string {
	s := ev.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ck := ev.evictionCheck(now, e)
	var evicted []string
	for c := range s.ros.all() {
		if !c.active() {
			continue
		}
		ev.updateClocks(c, ck)
		dl, mapped := ev.deadlockOf(c, ck)
		// A deadlock on mappings holds until the buffer has room
		// (endMappedDeadlocks), not only while the reader waits: after
		// its EDEADLK it no longer waits, and its status must still say
		// why (and its next open fail at once, not after another timeout).
		if dl == "" && !c.deadlockMapped {
			c.deadlock = ""
		}
		switch why := evictionFor(c, ck, dl); {
		case why != "":
			ev.evict(c, why)
			evicted = append(evicted, c.name)
		case dl != "" && c.deadlock == "":
			c.deadlock, c.deadlockMapped = dl, mapped
			s.broadcast() // its waits end with ErrDeadlock
		}
	}
	return evicted
}

// evictionCheck is what every rule sees of the store at one check.
type evictionCheck struct {
	Eviction
	now    time.Time
	oldest *batch // the buffer's oldest batch; nil when none is held
	// waiters: active consumers blocked for want of a batch, the ones a
	// straggler slows. mappedOut: every consumer waits and only mappings
	// of released batches keep the producer from making the next, so no
	// consumer's reading can help, and the store cannot tell whose
	// mappings they are.
	waiters   int
	mappedOut bool
	full      bool // the producer waits for room
}

// evictionCheck takes the store's side of one check. callers hold Store.mu.
func (ev *evictor) evictionCheck(now time.Time, e Eviction) *evictionCheck {
	s := ev.s
	full, onMappings := s.buf.full()
	ck := &evictionCheck{Eviction: e, now: now, oldest: s.buf.oldest(), full: full}
	active := 0
	for c := range s.ros.all() {
		if c.active() {
			active++
			if c.waiting > 0 {
				ck.waiters++
			}
		}
	}
	ck.mappedOut = ck.full && onMappings && ck.waiters == active
	return ck
}

// over says whether a condition that has held since start has held for
// the timeout.
func (ck *evictionCheck) over(start time.Time) bool {
	return !start.IsZero() && ck.now.Sub(start) >= ck.Timeout
}

// updateClocks starts or stops c's conditions. callers hold Store.mu.
func (ev *evictor) updateClocks(c *consumer, ck *evictionCheck) {
	s := ev.s
	holding := ck.full && ev.lagOf(c) > 0
	c.stalled = since(c.stalled, holding && len(c.handles) == 0 && c.waiting == 0, ck.now, c.progress)
	needsOldest := holding && ck.oldest != nil && s.ros.needs(c, ck.oldest)
	c.straggling = since(c.straggling, needsOldest && c.waiting == 0 && ck.waiters > 0, ck.now, time.Time{})
	// Waiting for a batch that only its own reading can make room for
	// (an open far ahead; more batches kept mapped than the buffer
	// holds): nothing else will end that wait, and everyone stalls.
	c.selfBlocked = since(c.selfBlocked, needsOldest && c.waiting > 0, ck.now, c.progress)
	c.mappedOut = since(c.mappedOut, ck.mappedOut && c.waiting > 0, ck.now, c.progress)
}

// deadlockOf is why c's waits can end no other way than in ErrDeadlock,
// and whether it is the mappings' (which end the moment readers unmap);
// "" while its waits may end. callers hold Store.mu.
func (ev *evictor) deadlockOf(c *consumer, ck *evictionCheck) (reason string, mapped bool) {
	s := ev.s
	switch {
	case ck.over(c.selfBlocked) && c.group != nil:
		return c.group.laggards(ck.Timeout), false
	case ck.over(c.selfBlocked) && len(c.handles) > 0:
		return fmt.Sprintf("read or unlink batch %d first, or hold fewer open", c.low), false
	case ck.over(c.selfBlocked):
		// It holds nothing: its next batch needs more producer batches
		// than the full buffer can hold beside what others still need
		// (a sparse subset in a small buffer).
		return "its next batch spans more producer batches than the buffer can hold beside what other consumers still need: raise the buffer size, lower its batch_size, or widen its subset", false
	case ck.over(c.mappedOut):
		return fmt.Sprintf("the buffer is taken by %s of batches already read but still mapped (a mapping outlives its file's close): drop arrays of old batches before reading on", humanize.IBytes(uint64(s.buf.lingeringBytes()))), true
	}
	return "", false
}

// evictionFor is why c is evicted now, "" if it is not: the first rule
// that applies decides. A consumer in a deadlock is not evicted but for
// the straggler policy evict: its waits fail instead, and it may recover.
func evictionFor(c *consumer, ck *evictionCheck, deadlock string) string {
	switch {
	case c.group != nil && deadlock != "":
		// Its ranks wait on one that does not read: a DDP training would
		// hang in its next step. Every rank's lookup fails at once.
		return "group failed: " + deadlock
	case ck.Straggler == Evict && ck.over(c.selfBlocked):
		return fmt.Sprintf("waited %s for a batch the full buffer could not make while it held back the buffer's oldest batch (straggler policy evict)", ck.Timeout)
	case deadlock != "":
		return ""
	case ck.over(c.stalled):
		return fmt.Sprintf("no open file and no progress for %s while the buffer was full", ck.Timeout)
	case ck.Straggler == Evict && ck.over(c.straggling):
		return fmt.Sprintf("held the oldest batch of a full buffer for %s (straggler policy evict)", ck.Timeout)
	}
	return ""
}

// endMappedDeadlocks lets the waits that mappings of released batches
// broke wait again: the producer has room, or will have. Callers hold
// s.mu.
func (ev *evictor) endMappedDeadlocks() {
	s := ev.s
	for c := range s.ros.all() {
		if c.deadlockMapped {
			c.deadlock, c.deadlockMapped = "", false
		}
		c.mappedOut = time.Time{}
	}
}

// since keeps the start of a condition: zero while it does not hold, the
// later of its old start and notBefore while it does.
func since(start time.Time, holds bool, now, notBefore time.Time) time.Time {
	switch {
	case !holds:
		return time.Time{}
	case start.IsZero():
		start = now
	}
	if notBefore.After(start) {
		return notBefore
	}
	return start
}

// lagOf counts the held batches c has pending. callers hold Store.mu.
func (ev *evictor) lagOf(c *consumer) int {
	s := ev.s
	n := 0
	for b := range s.buf.batches() {
		if s.ros.needs(c, b) {
			n++
		}
	}
	return n
}

// evict stops c holding anything back. Its directory stays, with the
// reason in its status, until it is removed. callers hold Store.mu.
func (ev *evictor) evict(c *consumer, reason string) {
	s := ev.s
	c.evicted = reason
	s.dem.wantsChanged()
	s.ros.dropPending(c)
}

// failsShort fails c, stuck (the buffer cannot hold its next batch
// whole), where a short batch would do harm, and says whether it did. On
// one node c takes a short batch (all its ranks share it). Across nodes
// this node's ranks would take one step more than the other nodes' (DDP
// then waits for them forever), so c fails instead, loudly. callers hold
// Store.mu.
func (ev *evictor) failsShort(c *consumer) bool {
	s := ev.s
	if s.cfg.Node.one() {
		return false
	}
	ev.evict(c, fmt.Sprintf("the buffer cannot hold its next batch; on node %d of %d a short one would leave its ranks a step apart from the other nodes' (raise --buffer)",
		s.cfg.Node.Index, s.cfg.Node.Count))
	s.broadcast()
	return true
}
