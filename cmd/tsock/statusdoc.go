package main

import (
	"encoding/json"
	"time"

	"github.com/tsock/tsock/batchstore"
)

// statusVersion is the version of MOUNTPOINT/status.json's layout: a
// program reading it checks it, and a change that would mislead an older
// reader bumps it.
const statusVersion = 1

// statusDoc is MOUNTPOINT/status.json: what status says, for programs
// (tsock status, python3 -m tsock status). Sizes are bytes, durations
// seconds, rates per second; -1 is "unknown", 0 epochs "forever".
type statusDoc struct {
	Version int    `json:"version"`
	Mode    string `json:"mode"` // "pipeline" (--source) or "ingest"
	Source  string `json:"source"`
	// Classes is how many classes the source has (MOUNTPOINT/classes
	// names them); -1 with --ingest, where the producer alone knows.
	Classes int `json:"classes"`
	// State is MOUNTPOINT/state's word (producing, full, idle, stopped,
	// failed); StateText says it for people.
	State     string      `json:"state"`
	StateText string      `json:"state_text"`
	Uptime    float64     `json:"uptime_seconds"`
	Producer  producerDoc `json:"producer"`
	Buffer    bufferDoc   `json:"buffer"`
	DataPath  string      `json:"data_path"`
	Skipped   int         `json:"skipped"`
	// Missing: samples whose keys were found missing this epoch, held
	// out of it until a listing at its end says whether the dataset is
	// still there (then skipped, counted) or vanishing (the run fails).
	Missing int `json:"missing"`
	// LeftOut: entries listing or indexing the source could not take
	// (an unreadable folder, a broken shard tail); status names them.
	LeftOut int `json:"left_out"`
	// LeftOutSamples: the samples those entries held, as far as known
	// (a shard's broken tail is taken to hold what a whole shard does
	// less what it did): they count against --max-skipped.
	LeftOutSamples int `json:"left_out_samples"`
	// Removed: samples whose files left a rescanned folder (--rescan):
	// out of the dataset, not skipped.
	Removed   int           `json:"removed"`
	Consumers []consumerDoc `json:"consumers"`
	GPU       *gpuDoc       `json:"gpu,omitempty"`
	Cache     *cacheDoc     `json:"cache,omitempty"`  // with --cache
	Remote    *remoteDoc    `json:"remote,omitempty"` // with an s3:// source
	Shards    *shardsDoc    `json:"shards,omitempty"` // with tar shards
	// Shuffle: how far a training epoch's shuffle reaches (not with
	// --ingest, whose producer orders its own batches).
	Shuffle *shuffleReach `json:"shuffle,omitempty"`
	Kept    *keptDoc      `json:"kept,omitempty"` // with --keep (--transform eval)
	Node    *nodeDoc      `json:"node,omitempty"` // across nodes (--node K/N, N > 1)

	// What MOUNTPOINT/status also says (statustext.go renders it from
	// this document alone).

	// Samples: the dataset's samples (with --ingest, as ingest/samples
	// says: 0 while unordered).
	Samples   int           `json:"samples"`
	Transform *transformDoc `json:"transform,omitempty"` // the built-in pipeline's
	Decoder   string        `json:"decoder,omitempty"`   // the built-in pipeline's JPEG decoder, said for people
	Ingest    *ingestDoc    `json:"ingest,omitempty"`    // with --ingest
	// Unwatched: seconds since the last consumer left (or the mount
	// started) with none active since; -1 while one is. IdleExit is
	// --idle-exit in seconds (0: never).
	Unwatched float64 `json:"unwatched_seconds"`
	IdleExit  float64 `json:"idle_exit_seconds"`
	// BatchInodes: batch files the kernel holds now; PrunesInodes, whether
	// it forgets them once released (NOTIFY_PRUNE, Linux 6.16+).
	BatchInodes  int        `json:"batch_inodes"`
	PrunesInodes bool       `json:"prunes_inodes"`
	Rescan       *rescanDoc `json:"rescan,omitempty"` // with --rescan
	// RecentSkips: the last samples skipped, "path: why"; LeftOutFirst,
	// the first entries listing or indexing left out.
	RecentSkips  []string `json:"recent_skips"`
	LeftOutFirst []string `json:"left_out_first"`
	// FreeErrors: batches whose memory could not be freed (leaked, no data
	// lost), and the last such error.
	FreeErrors    uint64 `json:"free_errors"`
	LastFreeError string `json:"last_free_error,omitempty"`
}

// nodeDoc is this mount's node among those of trials that span several:
// node Index of Count. Fingerprint names what every node must agree on
// (producer.NodeFingerprint: the node count, the seed, the dataset's
// size, classes and labels in the node order); nodes that print
// different ones cut different runs. From: where the numbers came from
// ("" for --node; SLURM_NODEID/SLURM_NNODES).
type nodeDoc struct {
	Index       int    `json:"index"`
	Count       int    `json:"count"`
	Fingerprint string `json:"fingerprint"`
	From        string `json:"from,omitempty"`
}

// transformDoc is the built-in pipeline's transform.
type transformDoc struct {
	Name      string `json:"name"` // train or eval
	ImageSize int    `json:"image_size"`
	Layout    string `json:"layout"`
	Seed      uint64 `json:"seed"`
	Workers   int    `json:"workers"`
}

// ingestDoc is --ingest's side: the next batch it takes, what it refused
// and when a producer last wrote (seconds ago; -1: never), and how its
// writes are served.
type ingestDoc struct {
	Next      uint64  `json:"next"`
	Refused   uint64  `json:"refused"`
	LastWrite float64 `json:"last_write_seconds"`
	Path      string  `json:"path"`
}

// rescanDoc is --rescan: samples rescans added, all told, and the last
// rescan that added some (LastAdded before producer epoch LastEpoch,
// LastAge seconds ago).
type rescanDoc struct {
	Added     int     `json:"added"`
	LastAdded int     `json:"last_added"`
	LastEpoch int     `json:"last_added_epoch"`
	LastAge   float64 `json:"last_added_seconds"`
}

// keptDoc is --keep: samples made once and copied into later epochs.
type keptDoc struct {
	Limit   int64  `json:"limit"`
	Used    int64  `json:"used"`
	Samples int    `json:"samples"`
	Served  uint64 `json:"served"`  // copies instead of decodes
	Refused uint64 `json:"refused"` // makings not kept for lack of room
}

// cacheDoc is --cache: what it holds, and how often it answered.
type cacheDoc struct {
	Limit  int64  `json:"limit"`
	Used   int64  `json:"used"`
	Files  int    `json:"files"`
	Hits   uint64 `json:"hits"`
	Misses uint64 `json:"misses"`
	// Dropped: files not kept for a failed write to the disk cache.
	Dropped uint64 `json:"dropped"`
	Dir     string `json:"dir"` // --cache-dir; "" in memory
}

// remoteDoc is the object store's traffic; requests count every attempt.
type remoteDoc struct {
	Endpoint string `json:"endpoint"`
	Requests uint64 `json:"requests"`
	Retries  uint64 `json:"retries"`
	Failures uint64 `json:"failures"`
	// Throttled: answers that asked to slow down (503 SlowDown, 429),
	// retried and paced, never failures.
	Throttled uint64 `json:"throttled"`
	Resumed   uint64 `json:"resumed"` // reads that went on from the byte reached after a break
	// Slow: attempts cut for a body under the rate floor, gone on from
	// the byte reached; RangesWhole: ranged GETs answered 200 with the
	// whole object, their range cut out of it.
	Slow        uint64  `json:"slow"`
	RangesWhole uint64  `json:"ranges_answered_whole"`
	Bytes       int64   `json:"bytes"`
	Rate        float64 `json:"bytes_per_second"` // the last 10 s
	// Waiting: requests waiting out the store's faults now (the producer
	// waits on the store, not on consumers), for WaitedFor seconds of
	// RetryFor (--s3-retry-for); LastFault, the last fault met.
	Waiting   int     `json:"waiting"`
	WaitedFor float64 `json:"waited_for"`
	RetryFor  float64 `json:"retry_for"`
	LastFault string  `json:"last_fault,omitempty"`
	// QuotaWaiting: requests waiting for the one that probes a store
	// whose retry quota is spent (0: the quota is not spent).
	QuotaWaiting int `json:"quota_waiting"`
	// Summary says all that for people, in one line.
	Summary string `json:"summary"`
}

// shardsDoc is piece reading: the shard memory and disk, the pieces (a
// shard whole, or a part of one) it holds, what was read, and the next
// epochs' first pieces carried (found held) or read ahead in vain.
type shardsDoc struct {
	Memory     int64  `json:"memory"`
	Alone      string `json:"alone,omitempty"`  // why every sample is read alone (a ranged read each); absent where pieces are read
	Labels     string `json:"labels,omitempty"` // why every label is 0 (Parquet files without a label column); absent otherwise
	Disk       int64  `json:"disk"`
	DiskDir    string `json:"disk_dir"`
	DiskUsed   int64  `json:"disk_used"`
	Pieces     int    `json:"pieces"`
	PieceBytes int64  `json:"piece_bytes"` // on average
	Held       int    `json:"held"`
	HeldBytes  int64  `json:"held_bytes"`
	Reading    int    `json:"reading"`
	Reads      int64  `json:"reads"`
	ReadBytes  int64  `json:"read_bytes"`
	// LastEpochReads and LastEpochReadBytes: the pieces the last epoch
	// whose schedule ended read (its next epoch's first, read ahead,
	// included): what an epoch costs.
	LastEpochReads     int64  `json:"last_epoch_reads"`
	LastEpochReadBytes int64  `json:"last_epoch_read_bytes"`
	Carried            int64  `json:"carried"`
	Wasted             int64  `json:"read_ahead_wasted"`
	Index              string `json:"index"` // "read from FILE", "written to FILE", ...; "" without --shard-index
}

type producerDoc struct {
	Unit      string `json:"unit"` // what a sample is: "images" or "samples"
	BatchSize int    `json:"batch_size"`
	Epoch     int    `json:"epoch"`
	Epochs    int    `json:"epochs"`
	// EpochDone of EpochLen samples of Epoch are made; EpochLen 0: unknown
	// (ingest without --samples).
	EpochDone   int     `json:"epoch_done"`
	EpochLen    int     `json:"epoch_len"`
	Batches     uint64  `json:"batches"`
	Samples     uint64  `json:"samples"`
	Rate        float64 `json:"rate"` // the last 10 s
	RateOverall float64 `json:"rate_overall"`
	// RateHistory is the rate in each of the last (up to 60) seconds,
	// oldest first.
	RateHistory []float64 `json:"rate_history"`
	Waited      float64   `json:"waited_seconds"`
}

type bufferDoc struct {
	Limit    int64 `json:"limit"`
	Used     int64 `json:"used"`
	Reserved int64 `json:"reserved"`
	// Mapped: released batches that readers still map; it counts against
	// Limit beside Used and Reserved. -1 where the backing cannot tell.
	Mapped  int64 `json:"mapped_after_release"`
	Batches int   `json:"batches"`
}

type consumerDoc struct {
	Name  string `json:"name"`
	State string `json:"state"` // consumers/NAME/state: reading, waiting, done, evicted
	// Subset is consumers/NAME/subset ("all", "fold 2/5", "list of 12",
	// …); SubsetSize its samples (the dataset's for all, 0 if unknown).
	// NextSubset, if set, applies from its own epoch NextFrom.
	Subset     string `json:"subset"`
	SubsetSize int    `json:"subset_size"`
	NextSubset string `json:"next_subset,omitempty"`
	NextFrom   int    `json:"next_from,omitempty"`
	// Epoch is its own epoch of the last batch it consumed, -1 before any;
	// it read EpochDone of that epoch's EpochLen samples (EpochLen 0:
	// unknown; skipped samples leave an epoch short of it).
	Epoch     int    `json:"epoch"`
	Epochs    int    `json:"epochs"`
	EpochDone uint64 `json:"epoch_done"`
	EpochLen  uint64 `json:"epoch_len"`
	BatchSize int    `json:"batch_size"`
	// ShortBatches: batches it got short of batch_size before its
	// epoch's end, so as not to deadlock (a sparse subset in a small buffer).
	ShortBatches uint64  `json:"short_batches"`
	Position     uint64  `json:"position"`
	Lag          uint64  `json:"lag_batches"`
	LagBytes     int64   `json:"lag_bytes"`
	BatchesRead  uint64  `json:"batches_read"`
	SamplesRead  uint64  `json:"samples_read"`
	BytesRead    int64   `json:"bytes_read"`
	OpenBatches  int     `json:"open_batches"`
	Waited       float64 `json:"waited_seconds"`
	// WaitShare is the part of its life it spent waiting for a batch: the
	// wait the pipeline exposes to it.
	WaitShare float64 `json:"wait_share"`
	Age       float64 `json:"age_seconds"`
	Evicted   string  `json:"evicted,omitempty"`
	Deadlock  string  `json:"deadlock,omitempty"`
	// GPUMemory: what NVML reports its process holds on tsock's GPU; -1
	// unknown. GPUPid: that process, 0 where NVML reports none. Only in
	// GPU mode.
	GPUMemory *int64 `json:"gpu_memory,omitempty"`
	GPUPid    int    `json:"gpu_pid,omitempty"`
	// StateText says State for people (why evicted, since when waiting).
	StateText string `json:"state_text"`
	// World: its ranks where it is a group (consumers/NAME/world), 0
	// where it is not; DropLast how an epoch's uneven tail is dealt; Ranks
	// each joined rank's progress; Missing the rank numbers not joined
	// yet (every rank waits for them). BatchSize is then each rank's.
	World    int       `json:"world,omitempty"`
	DropLast bool      `json:"drop_last,omitempty"`
	Ranks    []rankDoc `json:"ranks,omitempty"`
	Missing  []int     `json:"missing,omitempty"`
}

// rankDoc is one rank of a group (consumers/NAME/R).
type rankDoc struct {
	Rank        int    `json:"rank"`
	State       string `json:"state"` // reading, waiting, done
	Position    uint64 `json:"position"`
	Epoch       int    `json:"epoch"`
	EpochDone   uint64 `json:"epoch_done"`
	BatchesRead uint64 `json:"batches_read"`
	SamplesRead uint64 `json:"samples_read"`
	BytesRead   int64  `json:"bytes_read"`
	OpenBatches int    `json:"open_batches"`
	Alive       bool   `json:"alive"` // its process holds consumers/NAME/R/alive open
}

type gpuDoc struct {
	Name     string `json:"name"`
	UUID     string `json:"uuid"`
	Ordinal  int    `json:"ordinal"`
	Slabs    int    `json:"slabs"`
	SlabSize int64  `json:"slab_size"`
	InUse    int    `json:"slabs_in_use"`
	// Free and Total: the device's memory, where MemInfo (known).
	Free    int64  `json:"free"`
	Total   int64  `json:"total"`
	MemInfo bool   `json:"mem_info"`
	Upload  string `json:"upload"` // how batches reach the GPU, said for people
	// NVML: consumers' GPU memory is known (consumers' gpu_memory and
	// gpu_pid); NVMLWhy says why not.
	NVML    bool   `json:"nvml"`
	NVMLWhy string `json:"nvml_why,omitempty"`
}

// statusJSON renders MOUNTPOINT/status.json.
func (d *daemon) statusJSON() ([]byte, error) {
	return json.MarshalIndent(d.statusDoc(d.snapshot()), "", "  ")
}

// statusDoc is a snapshot for programs.
func (d *daemon) statusDoc(s *mountSnapshot) statusDoc {
	snap := s.store
	doc := statusDoc{
		Version: statusVersion, Uptime: snap.Uptime.Seconds(), DataPath: s.dataPath,
		State: s.state, StateText: s.stateText, Skipped: s.skipped, Missing: s.missing, LeftOut: len(s.leftOut), LeftOutSamples: s.leftOutSamples, Removed: s.removed,
		Producer: producerDoc{
			BatchSize: d.cfg.BatchSize, Epochs: d.cfg.Epochs, Batches: snap.Published, Samples: snap.SamplesPublished,
			Rate: s.rate, RateOverall: s.rateOverall, RateHistory: s.rateHistory, Waited: snap.ProducerWait.Seconds(),
			Epoch: s.epoch, EpochDone: s.epochDone, EpochLen: s.epochLen,
		},
		Buffer:    bufferDoc{Limit: snap.Limit, Used: snap.Used, Reserved: snap.Reserved, Mapped: snap.Lingering, Batches: snap.Held},
		Consumers: []consumerDoc{},
	}
	if s.ingest != nil {
		doc.Mode, doc.Source, doc.Producer.Unit, doc.Classes = "ingest", d.ingestDescription(), "samples", -1
	} else {
		doc.Mode, doc.Source, doc.Producer.Unit, doc.Classes = "pipeline", d.cfg.Source.Describe(), "images", len(d.cfg.Source.Classes())
	}
	for k, cs := range snap.Consumers {
		cd := d.consumerDoc(cs, uint64(s.epochLen))
		if s.gpu != nil {
			mem := s.gpu.memory(k)
			cd.GPUMemory = &mem
			if c := s.gpu.consumers[k]; c.ok {
				cd.GPUPid = c.pid
			}
		}
		doc.Consumers = append(doc.Consumers, cd)
	}
	if g := s.gpu; g != nil {
		doc.GPU = &gpuDoc{Name: g.info.Name, UUID: g.info.UUID, Ordinal: g.info.Ordinal, Slabs: g.slabs, SlabSize: g.slabSize, InUse: g.inUse,
			Free: g.free, Total: g.total, MemInfo: g.memInfo, Upload: g.upload, NVML: g.nvml, NVMLWhy: g.nvmlWhy}
	}
	doc.Unwatched, doc.IdleExit = -1, d.idleExit.Seconds()
	if !snap.Unwatched.IsZero() {
		doc.Unwatched = time.Since(snap.Unwatched).Seconds()
	}
	doc.BatchInodes, doc.PrunesInodes = s.batchInodes, s.prunesInodes
	doc.FreeErrors, doc.LastFreeError = snap.FreeErrors, snap.LastFreeError
	doc.RecentSkips, doc.LeftOutFirst = []string{}, s.leftOut[:min(len(s.leftOut), 3)]
	if doc.LeftOutFirst == nil {
		doc.LeftOutFirst = []string{}
	}
	if st := s.ingest; st != nil {
		doc.Samples = st.Samples
		doc.Ingest = &ingestDoc{Next: s.ingestNext, Refused: st.Refused, LastWrite: -1, Path: d.mounted.IngestPath()}
		if !st.LastWrite.IsZero() {
			doc.Ingest.LastWrite = time.Since(st.LastWrite).Seconds()
		}
	}
	if ps := s.producer; ps != nil {
		cfg := d.cfg
		doc.Samples, doc.Decoder = cfg.Source.Len(), s.decoder
		doc.Transform = &transformDoc{Name: string(cfg.Transform), ImageSize: cfg.ImageSize, Layout: string(cfg.Layout), Seed: cfg.Seed, Workers: cfg.Workers}
		doc.Node = d.node
		doc.RecentSkips = append(doc.RecentSkips, ps.RecentSkips...)
		if cfg.Rescan {
			doc.Rescan = &rescanDoc{Added: ps.Added, LastAdded: ps.LastAdded, LastEpoch: ps.LastAddedEpoch, LastAge: time.Since(ps.LastAddedAt).Seconds()}
		}
	}
	if cs := s.cache; cs != nil {
		doc.Cache = &cacheDoc{Limit: cs.Limit, Used: cs.Used, Files: cs.Files, Hits: cs.Hits, Misses: cs.Misses, Dropped: cs.Dropped, Dir: cs.Dir}
	}
	if k := s.kept; k != nil {
		doc.Kept = &keptDoc{Limit: k.Limit, Used: k.Used, Samples: k.Samples, Served: k.Served, Refused: k.Refused}
	}
	doc.Shuffle = d.shuffleReach(s.shards)
	if sh := s.shards; sh != nil {
		doc.Shards = &shardsDoc{Memory: sh.Memory, Alone: sh.Alone, Disk: sh.Disk, DiskDir: sh.DiskDir, DiskUsed: sh.DiskMapped, Pieces: sh.Pieces, PieceBytes: sh.PieceBytes, Held: sh.Held, HeldBytes: sh.HeldBytes, Reading: sh.Reading, Reads: sh.Reads,
			ReadBytes: sh.ReadBytes, LastEpochReads: sh.LastEpochReads, LastEpochReadBytes: sh.LastEpochReadBytes, Carried: sh.Carried, Wasted: sh.Wasted, Index: sh.Index, Labels: sh.Labels}
	}
	if r := s.remote; r != nil {
		doc.Remote = &remoteDoc{Endpoint: r.endpoint, Requests: r.requests, Retries: r.retries, Failures: r.failures, Throttled: r.throttled,
			Resumed: r.resumed, Slow: r.slow, RangesWhole: r.rangesWhole, Bytes: r.bytes, Rate: r.rate, Waiting: r.waiting, WaitedFor: r.waitedFor,
			RetryFor: r.retryFor, LastFault: r.lastFault, QuotaWaiting: r.quotaWaiting, Summary: r.line}
	}
	return doc
}

// consumerDoc is one consumer's part of status.json; epochLen is the
// samples in an epoch, 0 if unknown.
func (d *daemon) consumerDoc(cs batchstore.ConsumerSnapshot, epochLen uint64) consumerDoc {
	if cs.SubsetLen > 0 {
		epochLen = uint64(cs.SubsetLen) // its epochs are its subset's
	}
	doc := consumerDoc{
		Name: cs.Name, State: cs.State(), Subset: cs.Subset, SubsetSize: int(epochLen), NextSubset: cs.NextSubset, NextFrom: cs.NextFrom, Epoch: cs.Epoch, Epochs: d.cfg.Epochs, EpochLen: epochLen,
		BatchSize: cs.BatchSize, ShortBatches: cs.ShortBatches, Position: cs.Position, Lag: cs.Lag, LagBytes: cs.LagBytes,
		BatchesRead: cs.BatchesRead, SamplesRead: cs.SamplesRead, BytesRead: cs.BytesRead, OpenBatches: cs.OpenBatches,
		Waited: cs.WaitTotal.Seconds(), Age: cs.Age.Seconds(), Evicted: cs.Evicted, Deadlock: cs.Deadlock, StateText: cs.StateText(),
	}
	if cs.Age > 0 {
		doc.WaitShare = min(cs.WaitTotal.Seconds()/cs.Age.Seconds(), 1)
	}
	doc.EpochDone = cs.EpochSamples
	if cs.Done && epochLen > 0 {
		doc.EpochDone = epochLen // skipped samples leave its last epoch short
	}
	doc.World, doc.DropLast, doc.Missing = cs.World, cs.DropLast, cs.Missing
	for _, r := range cs.Ranks {
		state := "reading"
		switch {
		case r.Done:
			state = "done"
		case r.Waiting:
			state = "waiting"
		}
		doc.Ranks = append(doc.Ranks, rankDoc{Rank: r.Rank, State: state, Position: r.Position, Epoch: r.Epoch, EpochDone: r.EpochSamples,
			BatchesRead: r.BatchesRead, SamplesRead: r.SamplesRead, BytesRead: r.BytesRead, OpenBatches: r.OpenBatches, Alive: r.Alive})
	}
	return doc
}

// history is the rate in each second of the last minute, oldest first.
func (m *rateMeter) history() []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]float64, 0, len(m.samples))
	for i := 1; i < len(m.samples); i++ {
		a, b := m.samples[i-1], m.samples[i]
		if el := b.at.Sub(a.at).Seconds(); el > 0 {
			out = append(out, float64(b.n-a.n)/el)
		}
	}
	return out
}
