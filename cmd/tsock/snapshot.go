package main

import (
	"fmt"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/ingest"
	"github.com/tsock/tsock/producer/source"
)

// mountSnapshot is everything the mount's views say, gathered once per
// request: the status document (statusdoc.go: status.json, and the text
// MOUNTPOINT/status renders of it) and the metrics (Prometheus) are each
// made from one, so they never disagree and no counter is read twice for
// one answer (but the object store's: its status line, made by the
// source, reads them a moment before the numbers beside it). What is
// fixed for the mount's life (flags, the source's size) is read from the
// daemon itself.
type mountSnapshot struct {
	store                      batchstore.Snapshot
	rate, rateOverall          float64   // samples/s, the last 10 s and since the start
	rateHistory                []float64 // each second of the last minute, oldest first
	state, stateText           string    // MOUNTPOINT/state's word, and a line for people
	producer                   *producer.StatsSnapshot
	decoder                    string
	ingest                     *ingest.Stats // with --ingest
	ingestNext                 uint64
	cache                      *source.CacheStats // with --cache
	kept                       *producer.KeptStats
	remote                     *remoteSnapshot    // with an object-store source
	shards                     *source.ShardStats // with tar shards
	leftOut                    []string           // entries listing or indexing the source left out
	leftOutSamples             int                // the samples they held, as far as known
	removed                    int                // samples whose files left a rescanned folder
	dataPath                   string
	batchInodes                int
	prunesInodes               bool
	gpu                        *gpuSnapshot // with --device
	epoch, epochDone, epochLen int
	skipped                    int
	missing                    int // keys found missing this epoch, held until its end
}

// remoteSnapshot is an object store's traffic so far.
type remoteSnapshot struct {
	line, endpoint              string
	requests, retries, failures uint64
	throttled                   uint64 // SlowDown answers: retried and paced
	resumed                     uint64 // reads that went on from the byte reached
	slow                        uint64 // attempts cut under the rate floor
	rangesWhole                 uint64 // ranged GETs answered with the whole object
	quotaWaiting                int    // requests waiting for the retry quota's probe
	bytes                       int64
	rate                        float64 // bytes/s, the last 10 s
	// waiting requests wait out the store's faults now, for waitedFor
	// (seconds) of the budget; lastFault is the last of them.
	waiting             int
	waitedFor, retryFor float64
	lastFault           string
}

// gpuSnapshot is the GPU's state; consumers follow the store snapshot's
// order.
type gpuSnapshot struct {
	info        gpu.DeviceInfo
	slabs       int
	slabSize    int64
	inUse       int
	free, total int64
	memInfo     bool // free and total are known
	upload      string
	nvml        bool
	nvmlWhy     string
	consumers   []gpuConsumer
}

// gpuConsumer is what NVML reports a consumer's process holds.
type gpuConsumer struct {
	pid int
	mem uint64
	ok  bool
}

// snapshot gathers the mount's state.
func (d *daemon) snapshot() *mountSnapshot {
	s := &mountSnapshot{store: d.store.Snapshot()}
	s.rate, s.rateOverall = d.rate.rates(s.store.SamplesPublished)
	s.rateHistory = d.rate.history()
	failure := ""
	if d.ingest != nil {
		st := d.ingest.Snapshot()
		s.ingest, s.ingestNext = &st, d.ingest.Next()
		s.epoch, s.epochDone, s.epochLen, s.skipped = st.Epoch, st.Position, st.Samples, st.Skipped
	} else {
		ps := d.producer.Stats().Snapshot()
		s.producer, s.decoder, failure = &ps, d.producer.Decoder(), ps.Failure
		s.epoch, s.epochDone, s.epochLen, s.skipped, s.removed, s.missing = ps.Epoch, ps.EpochDone, ps.EpochLen, ps.Skipped, ps.Removed, ps.Missing
		if k, ok := d.producer.Kept(); ok {
			s.kept = &k
		}
	}
	s.state, s.stateText = producerState(s.store, failure)
	if s.ingest != nil && s.stateText == "producing" {
		s.stateText = ingestWaiting(s)
	}
	if cc, ok := d.cfg.Source.(source.Cached); ok {
		cs := cc.Stats()
		s.cache = &cs
	}
	if rs, ok := source.As[source.Remote](d.cfg.Source); ok && rs.Store() != nil {
		st := &rs.Store().Stats
		bytes := st.Bytes.Load()
		s.remote = &remoteSnapshot{
			line: rs.Remote(), endpoint: rs.Store().Endpoint(), requests: st.Requests.Load(), retries: st.Retries.Load(),
			failures: st.Failures.Load(), throttled: st.Throttled.Load(), resumed: st.Resumed.Load(), bytes: bytes,
			slow: st.Slow.Load(), rangesWhole: st.WholeForRange.Load(), quotaWaiting: rs.Store().Probing(),
			rate: d.rate.remoteRate(bytes), retryFor: rs.Store().RetryFor().Seconds(),
		}
		if n, since, last := rs.Store().Waiting(); n > 0 {
			s.remote.waiting, s.remote.waitedFor, s.remote.lastFault = n, time.Since(since).Seconds(), last
		}
	}
	if sh, ok := source.As[source.Sharded](d.cfg.Source); ok {
		st := sh.Stats()
		if st.Index == "" {
			st.Index = d.noIndex
		}
		s.shards = &st
	}
	if sk, ok := source.As[source.Skipper](d.cfg.Source); ok {
		s.leftOut, s.leftOutSamples = sk.Skipped(), sk.LeftOut()
	}
	s.dataPath, s.batchInodes, s.prunesInodes = d.mounted.DataPath(), d.mounted.BatchInodes(), d.mounted.PrunesInodes()
	if d.gpu != nil {
		s.gpu = d.gpu.snapshot(s.store.Consumers)
	}
	return s
}

// ingestWaiting is an ingest mount's state while it waits on outside
// producers: what it waits for, and how long nothing came (a producer
// that died says nothing itself).
func ingestWaiting(s *mountSnapshot) string {
	st := s.ingest
	if st.Writing != "" {
		return "writing " + st.Writing
	}
	since, what := st.LastWrite, "the last batch"
	if since.IsZero() {
		since, what = time.Now().Add(-s.store.Uptime), "the mount"
	}
	return fmt.Sprintf("waiting for a producer to write ingest/%06d.safetensors: nothing since %s at %s (%s ago)",
		s.ingestNext, what, since.Format(time.TimeOnly), time.Since(since).Round(time.Second))
}

// snapshot is the GPU's part of a mount snapshot: NVML is asked once per
// consumer.
func (g *gpuMode) snapshot(consumers []batchstore.ConsumerSnapshot) *gpuSnapshot {
	slabs := g.pool.Slabs()
	s := &gpuSnapshot{
		info: g.driver.Info(), slabs: len(slabs), slabSize: slabs[0].Size, inUse: g.pool.InUse(),
		upload: g.pool.UploadPath(),
	}
	if free, total, err := g.driver.MemInfo(); err == nil {
		s.free, s.total, s.memInfo = int64(free), int64(total), true
	}
	s.nvml, s.nvmlWhy = g.monitor.Available()
	for _, cs := range consumers {
		var gc gpuConsumer
		if s.nvml {
			gc.pid = processOf(int(cs.Caller))
			gc.mem, gc.ok = g.monitor.ProcessMemory(s.info.UUID, gc.pid)
		}
		s.consumers = append(s.consumers, gc)
	}
	return s
}

// memory is consumer k's GPU memory for status.json: -1 where NVML
// cannot tell, 0 where it reports none.
func (s *gpuSnapshot) memory(k int) int64 {
	switch c := s.consumers[k]; {
	case !s.nvml:
		return -1
	case c.ok:
		return int64(c.mem)
	}
	return 0
}
