package batchstore

import (
	"sort"
	"time"
)

// Snapshot is the store's state at one moment, for status files.
type Snapshot struct {
	Limit, Used, Reserved int64
	// Lingering: memory of freed batches that readers' mappings still
	// hold; it counts against Limit. -1 where the backing cannot tell.
	Lingering int64
	// LingerBlocked: the producer waits for lingering memory alone.
	LingerBlocked    bool
	Held             int    // batches in memory
	Published, Freed uint64 // batches, since start
	PublishedBytes   int64
	SamplesPublished uint64
	Finished         bool // the producer has published its last batch
	// Failure: why the producer stopped before the end of its data (every
	// sample skipped, say); "" while it has not.
	Failure         string
	ProducerWaiting bool // blocked because the buffer is full
	ProducerIdle    bool // no consumer needs more samples
	ProducerWaits   uint64
	ProducerWait    time.Duration
	FreeErrors      uint64
	LastFreeError   string
	Uptime          time.Duration
	// Unwatched: since when no consumer is active (zero while one is):
	// the buffer is then held for whoever joins next.
	Unwatched time.Time
	Consumers []ConsumerSnapshot
}

// ConsumerSnapshot is one consumer's state.
type ConsumerSnapshot struct {
	Name string
	// LastPublished is when the producer last published a batch, the
	// store's start before any: what a consumer waits on has not come since.
	LastPublished time.Time
	// Subset is what it trains on, as written ("all", "fold 2/5", …), and
	// SubsetLen its samples (0 for all). With NextSubset set, that one
	// applies from its own epoch NextFrom on.
	Subset     string
	SubsetLen  int
	NextSubset string
	NextFrom   int
	// SubsetRefused: why its last refused subset write was refused.
	SubsetRefused string
	JoinedEpoch   int  // producer epoch it started in
	JoinedPos     int  // sample position in that epoch where it started
	Stitched      bool // joined mid-epoch: its epochs span two producer epochs
	BatchSize     int  // its own batch size
	// ShortBatches: batches it got with fewer samples than its batch size
	// before its epoch's end, since the buffer could not hold a whole one
	// of its sparse subset beside what others needed (never a deadlock).
	ShortBatches uint64
	Position     uint64 // its own number of the next batch to consume
	Epoch        int    // its own epoch of the last batch consumed, -1 before any
	// EpochSamples: samples it consumed of Epoch (a progress, for people:
	// consumption may run out of order).
	EpochSamples uint64
	Lag          uint64 // producer batches held that it has not read
	LagBytes     int64
	BatchesRead  uint64
	SamplesRead  uint64
	BytesRead    int64
	OpenBatches  int // batches it holds open right now
	Waiting      bool
	WaitTotal    time.Duration
	Age          time.Duration
	Done         bool     // consumed everything there will ever be
	Evicted      string   // why it was evicted, "" if it was not
	Deadlock     string   // why its waits fail with ErrDeadlock, "" while they may wait
	Caller       CallerID // the thread that last looked up one of its batches, 0 before any
	// World: its ranks, where it is a group (0 where it is not); a rank's
	// own snapshot (GROUP/R) has its group's World and its Rank, and the
	// group's has every rank's progress in Ranks. Missing: the ranks that
	// have not joined yet, which every rank waits for.
	World    int
	DropLast bool
	Rank     int
	Ranks    []RankSnapshot
	Missing  []int
}

// RankSnapshot is one rank of a group: its own progress.
type RankSnapshot struct {
	Rank         int
	Position     uint64 // its own number of the next batch to consume
	Epoch        int    // its own epoch of the last batch consumed, -1 before any
	EpochSamples uint64
	BatchesRead  uint64
	SamplesRead  uint64
	BytesRead    int64
	OpenBatches  int
	Waiting      bool
	Alive        bool // its process holds its alive file open
	Done         bool // it has read to its end
}

// Snapshot returns the current state.
func (s *Store) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{
		Limit: s.cfg.Limit, Used: s.buf.used, Reserved: s.buf.reserved, Held: len(s.buf.held),
		Published: s.buf.stats.published, Freed: s.buf.stats.freed,
		PublishedBytes: s.buf.stats.publishedBytes, SamplesPublished: s.buf.samples,
		Finished: s.finished, ProducerWaiting: s.buf.stats.producerWaiting, ProducerIdle: s.buf.stats.producerIdle,
		ProducerWaits: s.buf.stats.producerWaits, ProducerWait: s.buf.stats.producerWait,
		FreeErrors: s.buf.stats.freeErrors, Uptime: time.Since(s.start), Unwatched: s.ros.unwatched,
		Lingering: -1, LingerBlocked: s.buf.stats.lingerBlocked,
	}
	if s.cfg.Lingering != nil {
		snap.Lingering = s.cfg.Lingering()
		s.buf.lingering = max(snap.Lingering, 0)
	}
	if s.failure != nil {
		snap.Failure = s.failure.Error()
	}
	if s.buf.stats.lastFreeError != nil {
		snap.LastFreeError = s.buf.stats.lastFreeError.Error()
	}
	for c := range s.ros.all() {
		snap.Consumers = append(snap.Consumers, s.ros.consumerSnapshot(c))
	}
	sort.Slice(snap.Consumers, func(i, j int) bool { return snap.Consumers[i].Name < snap.Consumers[j].Name })
	return snap
}

// ConsumerSnapshot returns one consumer's state.
func (s *Store) ConsumerSnapshot(name string) (ConsumerSnapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, _, isRank := splitRank(name); isRank {
		c, rk, err := s.ros.findRank(name)
		if err != nil {
			return ConsumerSnapshot{}, err
		}
		return s.ros.rankSnapshot(c, rk), nil
	}
	c, ok := s.ros.consumers[name]
	if !ok {
		return ConsumerSnapshot{}, ErrNoConsumer
	}
	return s.ros.consumerSnapshot(c), nil
}

func (ro *roster) consumerSnapshot(c *consumer) ConsumerSnapshot {
	s := ro.s
	cs := ConsumerSnapshot{
		Name: c.name, LastPublished: s.buf.lastPublish(), JoinedEpoch: c.joinEpoch, JoinedPos: c.joinPos, Stitched: c.splitID != 0,
		BatchSize: c.batchSize, ShortBatches: c.shortBatches, Position: c.low, Epoch: c.lastEpoch, EpochSamples: c.epochSamples,
		BatchesRead: c.batchesRead, SamplesRead: c.samplesRead, BytesRead: c.bytesRead,
		OpenBatches: len(c.handles), Waiting: c.waiting > 0, WaitTotal: c.waitTotal,
		Age:      time.Since(c.joined),
		Done:     ro.pastTheEnd(c, c.low),
		Evicted:  c.evicted,
		Deadlock: c.deadlock,
		Caller:   c.caller,
	}
	if g := c.group; g != nil {
		cs.World, cs.DropLast, cs.BatchSize = g.world, c.dropLast, g.perRank
		for r, rk := range g.ranks {
			if rk == nil {
				cs.Missing = append(cs.Missing, g.first+r)
				continue
			}
			cs.Ranks = append(cs.Ranks, ro.rankProgress(c, rk))
		}
	}
	k := max(c.lastEpoch, 0)
	sub := c.subsetFor(k)
	cs.Subset, cs.SubsetLen = sub.Form(), sub.Len()
	cs.SubsetRefused = c.subsetRefused
	if n := len(c.pending); n > 0 && k < c.pending[n-1].from {
		cs.NextSubset, cs.NextFrom = c.pending[n-1].sub.Form(), c.pending[n-1].from
	}
	if c.waiting > 0 {
		cs.WaitTotal += time.Since(c.waitSince)
	}
	if cs.LastPublished.IsZero() {
		cs.LastPublished = s.start
	}
	for b := range s.buf.batches() {
		if ro.needs(c, b) {
			cs.Lag++
			cs.LagBytes += b.blob.Size()
		}
	}
	return cs
}

// rankProgress is rk's own progress. callers hold Store.mu.
func (ro *roster) rankProgress(c *consumer, rk *rank) RankSnapshot {
	return RankSnapshot{
		Rank: rk.n, Position: rk.low, Epoch: rk.lastEpoch, EpochSamples: rk.epochSamples,
		BatchesRead: rk.batchesRead, SamplesRead: rk.samplesRead, BytesRead: rk.bytesRead,
		OpenBatches: len(rk.handles), Waiting: rk.waiting > 0, Alive: rk.alive > 0, Done: rk.ended,
	}
}

// rankSnapshot is rank rk's snapshot: its group's, with the rank's own
// progress. callers hold Store.mu.
func (ro *roster) rankSnapshot(c *consumer, rk *rank) ConsumerSnapshot {
	cs := ro.consumerSnapshot(c)
	p := ro.rankProgress(c, rk)
	cs.Name, cs.Rank, cs.Ranks = RankName(c.name, rk.n), rk.n, nil
	cs.Position, cs.Epoch, cs.EpochSamples = p.Position, p.Epoch, p.EpochSamples
	cs.BatchesRead, cs.SamplesRead, cs.BytesRead = p.BatchesRead, p.SamplesRead, p.BytesRead
	cs.OpenBatches, cs.Waiting, cs.Done, cs.Caller = p.OpenBatches, p.Waiting, p.Done, rk.caller
	return cs
}
