package batchstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tsock/tsock/batchstore/internal/plan"
)

// A group is a consumer read by the ranks of one data-parallel training
// (DDP): the consumer reads rounds of world × the ranks' batch size
// (its placement, subset, admission, eviction and freeing are a
// consumer's), and rank r's batch j is its share of round j
// (plan.Share). The rounds are consumed when every rank has consumed its
// share. A rank is named GROUP/R ("trial-3/2"), which no consumer name
// can be.

// MaxWorld bounds a group's ranks: a typo must not ask for a million
// rank directories.
const MaxWorld = 4096

// ErrBadRank: a rank number or world size that is refused (the message
// says what and where).
var ErrBadRank = errors.New("invalid rank or world size")

// group is what makes a consumer a group. Guarded by Store.mu.
type group struct {
	world int
	// first and here: this node serves the ranks [first, first+here) of
	// world (all of them on one node).
	first, here int
	perRank     int     // each rank's batch size (the consumer's batch size is here × it)
	ranks       []*rank // by number less first; nil until claimed
	claimed     int
	// rounds maps the ranks' batch numbers to the group's: rounds[j-base]
	// is the round of rank batch j. They differ only where dropLast left
	// a short epoch's last round out.
	rounds []uint64
	base   uint64
	next   uint64 // the next round to map
}

// rank is one rank of a group: what it has open and consumed, and its
// reading, as a consumer's. Guarded by Store.mu.
type rank struct {
	n       int
	id      int // unique for the store's life, as a consumer's (Ref.Consumer)
	done    map[uint64]struct{}
	low     uint64
	handles map[uint64]int
	waiting int
	caller  CallerID
	alive   int  // open handles on its alive file
	ended   bool // a lookup found it past its last batch
	left    bool
	readStats
	progress time.Time
}

// RankName is the name of rank r of group name.
func RankName(name string, r int) string { return name + "/" + strconv.Itoa(r) }

// splitRank splits "GROUP/R"; ok is false for a consumer's own name.
func splitRank(name string) (group string, r int, ok bool) {
	g, num, found := strings.Cut(name, "/")
	if !found {
		return name, 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || strconv.Itoa(n) != num {
		return g, -1, true
	}
	return g, n, true
}

// findRank is rank name's group consumer and rank. callers hold Store.mu.
func (ro *roster) findRank(name string) (*consumer, *rank, error) {
	gname, r, _ := splitRank(name)
	c, ok := ro.consumers[gname]
	if !ok || c.group == nil || !c.group.serves(r) || c.group.ranks[r-c.group.first] == nil {
		return nil, nil, fmt.Errorf("%s: %w", name, ErrNoConsumer)
	}
	return c, c.group.ranks[r-c.group.first], nil
}

// serves says whether rank r is one of this node's.
func (g *group) serves(r int) bool { return r >= g.first && r < g.first+g.here }

// full says whether every rank this node serves has joined: the group
// reads from then on.
func (g *group) full() bool { return g.claimed == g.here }

// SetWorld makes consumer name a group of world ranks, each reading
// batches of its batch size. It must come before any rank claimed its
// number; a world already set may be written again, the same.
func (s *Store) SetWorld(name string, world int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.ros.consumers[name]
	if !ok {
		return fmt.Errorf("world of %s: %w", name, ErrNoConsumer)
	}
	g := c.group
	switch {
	case g != nil && g.world == world:
		return nil
	case g != nil && g.claimed > 0:
		return fmt.Errorf("world %d for %s: its ranks joined as a world of %d: %w", world, name, g.world, ErrBadRank)
	case c.started:
		return fmt.Errorf("world of %s: already reading: %w", name, ErrBusy)
	case world < 1 || world > MaxWorld:
		return fmt.Errorf("world %d for %s: must be 1 to %d: %w", world, name, MaxWorld, ErrBadRank)
	}
	first, here, err := s.cfg.Node.ranks(world)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	per := c.batchSize
	if g != nil {
		per = g.perRank
	}
	if err := s.ros.fitRound(c, per, here); err != nil {
		return err
	}
	c.group = &group{world: world, first: first, here: here, perRank: per, ranks: make([]*rank, here)}
	c.batchSize = per * here
	c.batches = plan.BatchList{}
	s.dem.wantsChanged()
	return nil
}

// fitRound checks that a round of world batches of per samples (this
// node's ranks' batches) fits in
// the buffer, as SetBatchSize checks one consumer batch. callers hold
// Store.mu.
func (ro *roster) fitRound(c *consumer, per, world int) error {
	n := per * world
	if n > MaxBatchSize {
		return fmt.Errorf("%s: %d ranks of batch size %d make rounds of %d samples, over %d: %w", c.name, world, per, n, MaxBatchSize, ErrBadRank)
	}
	return ro.s.checkBatchSize(c.name, n)
}

// SetDropLast says how group name deals an epoch's uneven tail: dropped
// (fewer than world samples left out) or padded (repeats), as torch's
// DistributedSampler's drop_last. It is fixed once a rank claimed its
// number (the same value may be written again).
func (s *Store) SetDropLast(name string, drop bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.ros.consumers[name]
	switch {
	case !ok:
		return fmt.Errorf("drop_last of %s: %w", name, ErrNoConsumer)
	case c.dropLast == drop:
		return nil
	case c.group != nil && c.group.claimed > 0 || c.started:
		return fmt.Errorf("drop_last of %s: fixed once its ranks joined: %w", name, ErrBusy)
	}
	// Before its world too: the files are written in any order. Across
	// nodes what this node deals depends on it (Node.cut).
	sub, err := s.cfg.Node.cut(c.asked, drop)
	if err != nil {
		return fmt.Errorf("drop_last of %s: %w", name, err)
	}
	c.dropLast = drop
	if sub != c.subset {
		c.subset = sub
		if c.decided {
			s.dem.settle(c)
		}
		s.dem.wantsChanged()
		s.broadcast()
	}
	return nil
}

// DropLast is consumer name's drop_last: how its epochs' uneven tail is
// dealt once it is a group.
func (s *Store) DropLast(name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.ros.consumers[name]
	if !ok {
		return false, ErrNoConsumer
	}
	return c.dropLast, nil
}

// World is consumer name's world: 0 where it is not a group.
func (s *Store) World(name string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.ros.consumers[name]
	if !ok {
		return 0, ErrNoConsumer
	}
	if c.group == nil {
		return 0, nil
	}
	return c.group.world, nil
}

// JoinRank claims rank r of group name. Each number is claimed once
// (ErrExists), from 0 to world-1 (ErrBadRank). The ranks' lookups wait
// until every rank has joined: the group starts as one.
func (s *Store) JoinRank(name string, r int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.ros.consumers[name]
	switch {
	case !ok:
		return fmt.Errorf("rank %d of %s: %w", r, name, ErrNoConsumer)
	case c.group == nil:
		return fmt.Errorf("rank %d of %s: not a group (write its world first): %w", r, name, ErrBadRank)
	case !c.group.serves(r) && c.group.here == c.group.world:
		return fmt.Errorf("rank %d of %s: its world is %d (ranks 0 to %d): %w", r, name, c.group.world, c.group.world-1, ErrBadRank)
	case !c.group.serves(r):
		return fmt.Errorf("rank %d of %s: node %d of %d serves ranks %d to %d of its world of %d: %w",
			r, name, s.cfg.Node.Index, s.cfg.Node.Count, c.group.first, c.group.first+c.group.here-1, c.group.world, ErrBadRank)
	case c.group.ranks[r-c.group.first] != nil:
		return fmt.Errorf("rank %d of %s: claimed already: %w", r, name, ErrExists)
	case !c.active():
		return fmt.Errorf("rank %d of %s: %s: %w", r, name, c.evicted, ErrEvicted)
	}
	g := c.group
	s.ros.nextID++
	g.ranks[r-g.first] = &rank{n: r, id: s.ros.nextID, done: map[uint64]struct{}{}, handles: map[uint64]int{}, readStats: readStats{lastEpoch: -1}, progress: time.Now()}
	g.claimed++
	if g.full() {
		s.broadcast() // its ranks' lookups wait for this
	}
	return nil
}

// LeaveRank removes rank name ("GROUP/R"). A rank that leaves before its
// end fails its group: its peers would wait for it forever. Before the
// group read anything, its number is only free again.
func (s *Store) LeaveRank(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, rk, err := s.ros.findRank(name)
	if err != nil {
		return fmt.Errorf("leave %w", err)
	}
	if !c.started { // before the group read anything: its number is free again
		c.group.ranks[rk.n-c.group.first] = nil
		c.group.claimed--
		return nil
	}
	rk.left = true
	s.ros.rankGone(c, rk, fmt.Sprintf("rank %d left at its batch %d", rk.n, rk.low))
	return nil
}

// RankOpened and RankClosed count the handles on rank name's alive file,
// which its process holds open while it reads: the kernel closes it when
// the process dies, however it dies, and the group fails at once rather
// than after a timeout.
func (s *Store) RankOpened(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, rk, err := s.ros.findRank(name)
	if err != nil {
		return fmt.Errorf("open alive of %w", err)
	}
	rk.alive++
	return nil
}

// RankClosed: see RankOpened.
func (s *Store) RankClosed(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, rk, err := s.ros.findRank(name)
	if err != nil {
		return
	}
	rk.alive--
	if rk.alive == 0 && c.started { // before the group read anything, nothing is lost yet
		s.ros.rankGone(c, rk, fmt.Sprintf("rank %d's process closed its alive file (it exited?) at its batch %d", rk.n, rk.low))
	}
}

// rankGone fails rk's group, unless rk had read to its end. callers hold
// Store.mu.
func (ro *roster) rankGone(c *consumer, rk *rank, why string) {
	switch {
	case !c.active():
	case rk.ended && rk.left:
		ro.consumeRounds(c) // what it left unread need not wait for it
	case !rk.ended:
		ro.s.ev.evict(c, "group failed: "+why)
	}
}

// consumeRounds consumes every mapped round that each rank has consumed
// its share of or has left. callers hold Store.mu.
func (ro *roster) consumeRounds(c *consumer) {
	g := c.group
	for k, m := range g.rounds {
		j := g.base + uint64(k)
		all := true
		for _, o := range g.ranks {
			all = all && (o.left || o.isDone(j))
		}
		if all {
			ro.consume(c, m)
		}
	}
}

// lookupRank is Lookup for a rank: the rank's share of the round its
// batch local maps to, once every rank has joined.
func (s *Store) lookupRank(ctx context.Context, name string, local uint64, caller CallerID) (Ref, error) {
	c, rk, err := s.ros.findRank(name)
	if err != nil {
		return Ref{}, fmt.Errorf("lookup %w", err)
	}
	g := c.group
	rk.caller = caller
	for {
		switch {
		case s.closed:
			return Ref{}, ErrClosed
		case c.left || rk.left:
			return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, ErrNoConsumer)
		case c.evicted != "":
			return Ref{}, fmt.Errorf("lookup %s/%d: %s: %w", name, local, c.evicted, ErrEvicted)
		case rk.isDone(local):
			return Ref{}, fmt.Errorf("lookup %s/%d: consumed: %w", name, local, ErrNotFound)
		}
		if g.full() {
			if !c.started {
				if err := s.ros.decide(c); err != nil {
					return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, err)
				}
			}
			share, state := s.ros.resolveShare(c, rk, local)
			// Stuck only where no rank holds an earlier round: a rank
			// that lags makes room by reading, and a short round then
			// would only shrink the batches.
			if state == plan.UnknownYet && c.low == g.next && s.ros.stuck(c, g.next) {
				if s.ev.failsShort(c) {
					continue // failed: the checks above say so
				}
				c.allowShort = true
				share, state = s.ros.resolveShare(c, rk, local)
				c.allowShort = false
			}
			switch state {
			case plan.PastEnd:
				// It has read to its end (its last batch may still be
				// open: a loader asks for the next while it trains on
				// the last): its leaving costs its peers nothing.
				rk.ended = true
				if errors.Is(s.failure, ErrNoSamples) {
					return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, s.failure)
				}
				return Ref{}, fmt.Errorf("lookup %s/%d: past the rank's last epoch: %w", name, local, ErrNotFound)
			case plan.Known:
				ref, err := s.ros.ref(c, local, share)
				if err != nil {
					return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, err)
				}
				ref.Consumer = rk.id
				if ref.Direct {
					s.buf.held[ref.Seq].lookups[caller] = batchKey{c: c, j: local, rk: rk}
				}
				return ref, nil
			}
			if s.failure != nil {
				return Ref{}, fmt.Errorf("lookup %s/%d: %w: %w", name, local, ErrProducerFailed, s.failure)
			}
			if s.finished {
				return Ref{}, fmt.Errorf("lookup %s/%d: the producer has stopped: %w", name, local, ErrNotFound)
			}
			if c.deadlock != "" {
				return Ref{}, fmt.Errorf("lookup %s/%d: %s: %w", name, local, c.deadlock, ErrDeadlock)
			}
		}
		rk.waiting++
		err := s.ros.waitFor(ctx, c)
		rk.waiting--
		if err != nil {
			return Ref{}, fmt.Errorf("lookup %s/%d: %w", name, local, err)
		}
	}
}

// resolveShare is rk's batch local: its share of the round that batch
// maps to (plan.Share). Rounds are mapped in order; one that deals
// nothing (dropLast, an epoch's last round shorter than the world) is
// consumed for the group and mapped to no batch. callers hold Store.mu.
func (ro *roster) resolveShare(c *consumer, rk *rank, local uint64) (plan.Batch, plan.Resolved) {
	g := c.group
	for g.base+uint64(len(g.rounds)) <= local {
		if ro.pastTheEnd(c, g.next) {
			return plan.Batch{}, plan.PastEnd
		}
		round, state := ro.resolve(c, g.next)
		if state != plan.Known {
			return plan.Batch{}, state
		}
		if _, ok := plan.Share(round, 0, g.here, g.perRank, ro.endsEpoch(c, round), c.dropLast); !ok {
			ro.consume(c, g.next) // no rank reads it
			g.next++
			continue
		}
		g.rounds = append(g.rounds, g.next)
		g.next++
	}
	share, ok := ro.shareOf(c, rk, local)
	if !ok {
		return plan.Batch{}, plan.PastEnd // consumed by every rank
	}
	return share, plan.Known
}

// endsEpoch says whether round is the last of c's epoch. callers hold
// Store.mu.
func (ro *roster) endsEpoch(c *consumer, round plan.Batch) bool {
	return plan.RoundEndsEpoch(ro.s.stream(), ro.reader(c), round)
}

// shareOf is rank rk's share of c's round for its batch local. callers
// hold Store.mu.
func (ro *roster) shareOf(c *consumer, rk *rank, local uint64) (plan.Batch, bool) {
	g := c.group
	if local < g.base || local >= g.base+uint64(len(g.rounds)) {
		return plan.Batch{}, false
	}
	round, ok := c.batches.Get(g.rounds[local-g.base])
	if !ok {
		return plan.Batch{}, false
	}
	return plan.Share(round, rk.n-g.first, g.here, g.perRank, ro.endsEpoch(c, round), c.dropLast)
}

func (rk *rank) isDone(j uint64) bool {
	if j < rk.low {
		return true
	}
	_, ok := rk.done[j]
	return ok
}

// consumeShare records that rk is done with its batch j; the round is
// the group's to consume once every rank is. callers hold Store.mu.
func (ro *roster) consumeShare(c *consumer, rk *rank, j uint64) {
	g := c.group
	share, ok := ro.shareOf(c, rk, j)
	if !ok || !c.active() || rk.isDone(j) {
		return
	}
	rk.progress = time.Now()
	ro.counted(&rk.readStats, share)
	rk.low = markDone(rk.done, rk.low, j)
	m := g.rounds[j-g.base]
	for _, o := range g.ranks {
		if !o.left && !o.isDone(j) {
			return
		}
	}
	ro.consume(c, m)
	// Every rank is past j: its mapping is not asked again.
	low := rk.low
	for _, o := range g.ranks {
		low = min(low, o.low)
	}
	if n := low - g.base; n > 64 && 2*n > uint64(len(g.rounds)) {
		g.rounds = append([]uint64(nil), g.rounds[n:]...)
		g.base = low
	}
}

// pendingShares is Pending for a rank: its batches readable now, once
// every rank has joined. callers hold Store.mu.
func (ro *roster) pendingShares(name string) ([]Ref, error) {
	c, rk, err := ro.findRank(name)
	if err != nil {
		return nil, fmt.Errorf("list %w", err)
	}
	if !c.active() || rk.left || !c.group.full() {
		return nil, nil
	}
	var refs []Ref
	for j := rk.low; ; j++ {
		share, state := ro.resolveShare(c, rk, j)
		if state != plan.Known {
			break
		}
		if rk.isDone(j) {
			continue
		}
		ref, err := ro.ref(c, j, share)
		if err != nil {
			break
		}
		ref.Consumer = rk.id
		refs = append(refs, ref)
	}
	return refs, nil
}

// laggards says which ranks hold the group back: those that have not
// read the round the others wait past. callers hold Store.mu.
func (g *group) laggards(timeout time.Duration) string {
	low := uint64(0)
	first := true
	for _, rk := range g.ranks {
		if rk != nil && (first || rk.low < low) {
			low, first = rk.low, false
		}
	}
	var slow []int
	for _, rk := range g.ranks {
		if rk != nil && rk.low == low && rk.waiting == 0 {
			slow = append(slow, rk.n)
		}
	}
	return fmt.Sprintf("rank %v did not read its batch %d for %s while the other ranks waited for batches only its reading makes room for (a stalled or dead rank)", slow, low, timeout)
}
