package batchstore

import (
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/tsock/tsock/batchstore/internal/plan"
)

// roster is the consumers and the producer epochs split by a mid-epoch
// join. Guarded by Store.mu.
type roster struct {
	s         *Store
	consumers map[string]*consumer
	splits    map[int]*split
	nextID    int
	unwatched time.Time // since when no consumer is active; zero while one is
	// neededBy is, for a held batch, the consumer last found needing it
	// (anyNeeds asks it first).
	neededBy map[uint64]*consumer
}

// noteWatchers keeps unwatched: zero while some consumer is active, else
// since when none is. callers hold Store.mu.
func (ro *roster) noteWatchers() {
	for _, c := range ro.consumers {
		if c.active() {
			ro.unwatched = time.Time{}
			return
		}
	}
	if ro.unwatched.IsZero() {
		ro.unwatched = time.Now()
	}
}

// CallerID names the thread that made a request, so an open can be charged
// to the consumer whose directory that thread looked the batch up in.
type CallerID uint32

// split is where a consumer joined mid-epoch: its epochs end at the same
// place in every later producer epoch, which the producer keeps by putting
// the samples before the split first (shuffled among themselves).
type split struct {
	id    int
	epoch int // the epoch it was made in
	pos   int // order position in that epoch
}

// consumer is one reader of the store. Its fields are grouped by concern
// (the embedded structs below); every one is guarded by Store.mu.
type consumer struct {
	name        string
	id          int
	placement          // where its batches lie in the producer's stream
	holding            // what it has open and has consumed
	lifecycle          // joined, left, evicted
	clocks             // the eviction and deadlock conditions (evict.go)
	readStats          // what it read and waited, for status
	subsetState        // what it trains on
	group       *group // its ranks, where it is a group (group.go); nil for one reader
	// dropLast: as a group, an epoch's uneven tail is dropped, not padded.
	dropLast bool
}

// placement is where a consumer's batches lie in the producer's stream:
// fixed at its first lookup, then computed batch by batch.
type placement struct {
	batchSize  int
	started    bool   // it has looked up a batch: its batch size is fixed
	joinEpoch  int    // producer epoch its first epoch starts in
	joinPos    int    // output position in that epoch where it starts
	splitID    int    // its split, 0 when aligned to producer epochs
	start      uint64 // global sample of its first sample; valid when startKnown
	startKnown bool
	batches    plan.BatchList // its batches computed so far, those it may still open
}

// holding is what a consumer has open and has consumed.
type holding struct {
	done    map[uint64]struct{}
	low     uint64         // its lowest unconsumed batch number
	handles map[uint64]int // open leases per batch number
	waiting int            // lookups blocked right now
	caller  CallerID       // the process (thread) that last looked up one of its batches
}

// lifecycle is a consumer's life: from join to leave or eviction.
type lifecycle struct {
	joined   time.Time
	left     bool
	evicted  string    // why it was evicted; "" while it is not
	progress time.Time // when it last joined, opened or consumed
}

// clocks are since when each eviction or deadlock condition has held of a
// consumer (zero: it does not), and the deadlock it was found in.
type clocks struct {
	stalled    time.Time // since when it holds back a full buffer without progress
	straggling time.Time // since when it holds the oldest batch of a full buffer
	// selfBlocked: since when it waits for a batch that the full buffer
	// cannot make while it needs the buffer's oldest batch itself, with
	// no progress. mappedOut: since when it waits, as every consumer
	// does, while only memory of released batches that is still mapped
	// keeps the producer waiting. deadlock: after a consumer timeout of
	// either, why its waits fail with ErrDeadlock instead of lasting
	// forever; "" while they may wait.
	selfBlocked time.Time
	mappedOut   time.Time
	deadlock    string
	// deadlockMapped: the deadlock is mappedOut's, which ends the moment
	// readers unmap, before the producer has looked again.
	deadlockMapped bool
}

// readStats are what a consumer read and how long it waited.
type readStats struct {
	batchesRead  uint64
	bytesRead    int64
	samplesRead  uint64
	lastEpoch    int    // its own epoch of the last batch consumed, -1 before any
	epochSamples uint64 // samples it consumed of lastEpoch
	waitTotal    time.Duration
	waitSince    time.Time
}

// subsetState is what a consumer trains on: subset (nil: everything),
// then each pending change from its own epoch on, oldest first.
type subsetState struct {
	subset  *Subset
	pending []subsetChange
	// asked is the subset as the consumer set it (nil: everything), before
	// the node's cut (node.go) made subset of it.
	asked *Subset
	// decided: it set a subset or began reading. Until then its wants
	// (everything) hold no epoch's order back (settle.go).
	decided bool
	// allowShort: the batch being computed may hold fewer samples than
	// its batch size (stuck); shortBatches counts those it got.
	allowShort   bool
	shortBatches uint64
	// subsetRefused: why the last refused write to its subset file was
	// refused, for its status.
	subsetRefused string
}

// subsetChange is a subset that applies from the consumer's epoch from.
type subsetChange struct {
	from int
	sub  *Subset
}

// subsetFor is c's subset in its own epoch k.
func (c *consumer) subsetFor(k int) *Subset {
	sub := c.subset
	for _, p := range c.pending {
		if k >= p.from {
			sub = p.sub
		}
	}
	return sub
}

// wants is everything c's subsets hold, now and from its next epochs
// (nil: everything).
func (c *consumer) wants() *Subset {
	mine := c.subset
	for _, p := range c.pending {
		mine = union(mine, p.sub)
	}
	return mine
}

// active: still reading; a consumer that left or was evicted has nothing
// pending and gets nothing new.
func (c *consumer) active() bool { return !c.left && c.evicted == "" }

var validName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// ValidName reports whether name may name a consumer: 1–64 characters of
// letters, digits, '_', '.', '-', not starting with '.' or '-'.
func ValidName(name string) bool { return validName.MatchString(name) }

// Join adds a consumer. It starts at the oldest batch still held from
// which it can read exact epochs: the start of the oldest producer epoch
// held whole from its first batch on, else in the producer epoch whose
// successor is not ordered yet, so that the producer can still put the
// samples it missed first in the next epoch.
func (s *Store) Join(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("join %q: %w", name, ErrBadName)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if _, ok := s.ros.consumers[name]; ok {
		return fmt.Errorf("join %q: %w", name, ErrExists)
	}
	s.ros.nextID++
	c := &consumer{
		name: name, id: s.ros.nextID,
		placement: placement{batchSize: s.cfg.BatchSize},
		holding:   holding{done: make(map[uint64]struct{}), handles: make(map[uint64]int)},
		lifecycle: lifecycle{joined: time.Now(), progress: time.Now()},
		readStats: readStats{lastEpoch: -1},
	}
	c.subset = s.universe // all of this node's share
	s.ros.place(c)
	s.ros.consumers[name] = c
	s.dem.wantsChanged()
	s.ros.noteWatchers()
	// What it starts after is passed for it: that may free batches kept
	// for the first joiner.
	s.dem.passBefore(c)
	s.broadcast()
	return nil
}

// Leave removes a consumer and releases everything it held back. Leases it
// still has open stay valid until they are released.
func (s *Store) Leave(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.ros.consumers[name]
	if !ok {
		return fmt.Errorf("leave %q: %w", name, ErrNoConsumer)
	}
	if g := c.group; g != nil {
		for _, rk := range g.ranks {
			if rk != nil && !rk.left {
				return fmt.Errorf("leave %q: rank %d is still there (rmdir its directory first): %w", name, rk.n, ErrNotEmpty)
			}
		}
	}
	c.left = true
	delete(s.ros.consumers, name)
	s.dem.wantsChanged()
	s.ros.dropPending(c)
	return nil
}

// dropPending stops c from holding anything back. callers hold Store.mu.
func (ro *roster) dropPending(c *consumer) {
	s := ro.s
	delete(ro.splits, c.id)
	ro.noteWatchers()
	for b := range s.buf.batches() {
		for caller, k := range b.lookups {
			if k.c == c {
				delete(b.lookups, caller)
			}
		}
	}
	s.buf.freeWhatWeCan()
	s.broadcast()
}

// SetBatchSize gives name its own batch size. It must come before the
// consumer's first lookup (ErrBusy after), and a batch of that size must
// fit in the buffer with room to spare (ErrBadBatchSize).
func (s *Store) SetBatchSize(name string, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.ros.consumers[name]
	if !ok {
		return fmt.Errorf("batch size of %s: %w", name, ErrNoConsumer)
	}
	if g := c.group; g != nil { // a group: n is each rank's
		switch {
		case n == g.perRank:
			return nil
		case g.claimed > 0 || c.started:
			return fmt.Errorf("batch size %d for %s: its ranks joined with batch size %d: %w", n, name, g.perRank, ErrBusy)
		}
		if err := s.ros.fitRound(c, n, g.here); err != nil {
			return err
		}
		g.perRank, c.batchSize = n, n*g.here
		c.batches = plan.BatchList{}
		return nil
	}
	if c.started {
		return fmt.Errorf("batch size of %s: already reading: %w", name, ErrBusy)
	}
	if err := s.checkBatchSize(name, n); err != nil {
		return err
	}
	c.batchSize = n
	c.batches = plan.BatchList{} // a listing may have computed some in the batch size before
	return nil
}

// checkBatchSize refuses a consumer batch size of n that is out of range
// or would not fit in the buffer. callers hold Store.mu.
func (s *Store) checkBatchSize(name string, n int) error {
	if n < 1 || n > MaxBatchSize {
		return fmt.Errorf("batch size %d for %s: must be 1 to %d: %w", n, name, MaxBatchSize, ErrBadBatchSize)
	}
	// The producer batches a consumer batch spans must be held together.
	// n and BatchSize are at most MaxBatchSize and a batch's bytes at most
	// Limit, so nothing here overflows.
	spans := int64((n-1)/s.cfg.BatchSize + 2)
	if full := s.buf.fullBatchBytes(); full > 0 && spans > s.cfg.Limit/full {
		return fmt.Errorf("batch size %d for %s: must fit %d producer batches in the buffer: %w",
			n, name, spans, ErrBadBatchSize)
	}
	if s.cfg.MaxBatches > 0 && spans > int64(s.cfg.MaxBatches) {
		return fmt.Errorf("batch size %d for %s: spans %d producer batches, and only %d can be held at once (GPU slabs): %w",
			n, name, spans, s.cfg.MaxBatches, ErrBadBatchSize)
	}
	return nil
}

// BatchSize is name's batch size.
func (s *Store) BatchSize(name string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.ros.consumers[name]
	if !ok {
		return 0, ErrNoConsumer
	}
	if c.group != nil {
		return c.group.perRank, nil
	}
	return c.batchSize, nil
}

// Consumers lists the names of joined consumers, sorted.
func (s *Store) Consumers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.ros.consumers))
	for name := range s.ros.consumers {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
