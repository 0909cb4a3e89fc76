package main

// The mount's command line: each flag parsed once into its typed value
// (values.go), checked together before anything is touched.

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/ingest"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/skipbudget"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote"
)

// mountFlags is the mount's command line, each flag parsed once into its
// typed value (values.go) and checked together in validate.
type mountFlags struct {
	mountpoint string
	source     string // --source as given; opened by Run
	ingestMode bool
	s3         remote.Config

	cfg       producer.Config // the built-in pipeline's, Source set by Run
	ingestCfg ingest.Config
	order     string // --order: shuffle or sequential
	nodeFrom  string // where --node's value came from, where not the flag

	buffer    int64 // bytes for batches
	cacheSize int64 // 0: no --cache
	cacheDir  string
	// shardMemory: bytes of pieces of shards (tar or Parquet) held in memory at once
	// (read ahead and shuffled across; more on shardDisk); 0: each sample
	// read alone.
	shardMemory int64
	shardDisk   diskFlags
	shardIndex  string         // the shards' index file: "" for none
	columns     source.Columns // Parquet files' image and label columns
	noIndex     string         // why none is kept, for status ("" with one)
	keepAuto    bool           // --keep auto: as much as --buffer with eval, else none
	fetchAuto   bool           // --fetch auto: defaultRemoteFetch for s3://, else 0

	device     string // "" without --device
	deviceSpec gpu.DeviceSpec
	gpuBuffer  int64 // 0: as --buffer
	gpuSlab    int64 // 0: --gpu-buffer/8

	storage     string // auto, tmpfs or memfd
	passthrough string // auto or off
	join        string // any or epoch
	eviction    batchstore.Eviction

	metricsListen string
	debug         bool
	allowOther    bool
	idleExit      time.Duration
}

func (c *mountCommand) Usage() string {
	return flagUsage("usage: tsock mount MOUNTPOINT --source DIR|synthetic:N [flags]\n"+
		"       tsock mount MOUNTPOINT --ingest [--samples N] [flags]\n\n"+
		"Serves batches: mkdir MOUNTPOINT/consumers/NAME, then read\n"+
		"MOUNTPOINT/consumers/NAME/000000.safetensors, 000001.safetensors, ...\n"+
		"With --ingest, any program publishes them by writing MOUNTPOINT/ingest/NNNNNN.safetensors.", c.flags)
}

func (c *mountCommand) Parse(args []string) error {
	f := newFlagSet("mount")
	c.flags = f
	c.s3 = remote.DefaultConfig()
	f.StringVar(&c.source, "source", "", "image folder in ImageFolder form, WebDataset tar shards ('DIR/train-{000000..000099}.tar', globs too; or s3://BUCKET/KEYS.tar), Parquet files as the Hugging Face Hub publishes them ('DIR/train-*.parquet', or s3://BUCKET/KEYS.parquet), or synthetic:N")
	f.StringVar(&c.s3.Endpoint, "s3-endpoint", "", "S3-compatible server for s3:// sources (http://HOST:PORT for plain HTTP); default AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, then AWS")
	f.DurationVar(&c.s3.RetryFor, "s3-retry-for", c.s3.RetryFor, "how long a request waits out a store that fails it (errors, resets, refused connections, throttling; credentials refused after they worked, with fresh ones each try), from its first fault, with backoff and jitter, before the run fails")
	f.BoolVar(&c.ingestMode, "ingest", false, "batches come from outside: producers write them into MOUNTPOINT/ingest/")
	f.IntVar(&c.ingestCfg.Samples, "samples", 0, "with --ingest: dataset size N; tsock owns the order (ingest/order) and every epoch is exact")
	newParsed(f, &c.order, oneOf("shuffle", "sequential"), "order", "shuffle", "with --ingest --samples: shuffle (each epoch, from --seed) or sequential")
	f.IntVar(&c.cfg.BatchSize, "batch-size", 256, "samples per batch")
	f.IntVar(&c.cfg.ImageSize, "image-size", 224, "side of the square output images, pixels")
	f.IntVar(&c.cfg.Epochs, "epochs", 1, "epochs to produce; 0 means forever")
	newSize(f, &c.buffer, "buffer", "2GiB", false, "memory for batches, all consumers together")
	newSize(f, &c.cacheSize, "cache", "0", true, "memory (or disk, with --cache-dir) for encoded files kept after their first read, so later epochs read no disk or network; 0: off")
	newSize(f, &c.shardMemory, "shard-memory", "512MiB", true, "memory for shards (tar or Parquet) read whole (or in pieces: parts of 8 MiB or more of a tar shard, a Parquet file's row groups), once an epoch (one request a piece), ahead of the workers, and shuffled across; 0: read each sample alone (a ranged request each; a Parquet row, its page)")
	c.shardDisk.add(f)
	newParsed(f, &c.columns, source.ParseColumns, "columns", "", "the columns of Parquet files (--source ….parquet) that hold the image and the label, where they are not the Hub's image and label: `image=NAME,label=NAME` (a dotted NAME is a nested field; label= with no name: no labels, every sample's is 0)")
	f.StringVar(&c.shardIndex, "shard-index", "", "where the shards' index is kept (tar shards' members, Parquet files' footers and labels; a `FILE`, or none): read at mount where it indexes these shards as they are (no shard read to index them), else written there, so that only a first mount reads the shards to index them; a file on a shared file system serves every node (default: one per dataset under $XDG_CACHE_HOME or ~/.cache, in tsock/shard-index/)")
	f.StringVar(&c.cacheDir, "cache-dir", "", "keep the --cache in an unnamed file in this directory (a local disk), not in memory: for datasets larger than memory; gone when the mount ends")
	newAutoSize(f, &c.keepAuto, &c.cfg.Keep, "keep", "with --transform eval: memory for the samples made in the first epoch, copied into later ones with no decode; auto: as much as --buffer (0 with train)")
	f.BoolVar(&c.cfg.Rescan, "rescan", false, "list a local folder --source again at each producer epoch: new files join the data (new indices after the others), vanished ones are skipped")
	newAutoCount(f, &c.fetchAuto, &c.cfg.Fetch, producer.MaxFetch, "fetch", fmt.Sprintf("images read ahead of the workers, this many requests in flight: auto (%d for s3:// sources, 0 for local ones) or 0 to %d", defaultRemoteFetch, producer.MaxFetch))
	newParsed(f, &c.cfg.MaxSkipped, skipbudget.Parse, "max-skipped", skipbudget.Default,
		"samples a run may skip for their own bytes (corrupt, unreadable), a count or a percentage of the dataset; past it the run fails instead of delivering short epochs")
	f.IntVar(&c.cfg.Workers, "workers", 0, "decoding workers; 0 means one per core")
	f.Uint64Var(&c.cfg.Seed, "seed", 0, "seed of shuffles and crops")
	newParsed(f, &c.cfg.Node, parseNode, "node", "",
		"this node K of N (0 ≤ K < N) of trials whose ranks span N nodes, one tsock a node: each consumer reads its node's share of its data (about 1/N of the bytes read), a group of world W its ranks K·W/N to (K+1)·W/N-1; default SLURM_NODEID/SLURM_NNODES where set, else 0/1 (one node: all the data)")
	newParsed(f, &c.cfg.Layout, pipeline.ParseLayout, "layout", "nchw", "image axes: nchw or nhwc")
	newParsed(f, &c.cfg.Transform, pipeline.ParseTransform, "transform", "train", "train (random crop + flip, shuffled) or eval (centre crop, in order)")
	f.DurationVar(&c.eviction.Timeout, "consumer-timeout", 30*time.Second,
		"evict a consumer with no open file and no progress for this long while the buffer is full")
	newParsed(f, &c.eviction.Straggler, batchstore.ParseStraggler, "straggler", "block", "block: all wait for the slowest consumer; evict: evict one that holds a full buffer for --consumer-timeout")
	newParsed(f, &c.cfg.Decoder, oneOf(pipeline.DecoderAuto, pipeline.DecoderTurbo, pipeline.DecoderGo), "decoder", "auto", "JPEG decoder: auto (libjpeg-turbo if installed), turbo, or go")
	newParsed(f, &c.join, oneOf("any", "epoch"), "join", "any", "any: a consumer joins mid-epoch, its epochs stitched exact; epoch: it waits for the next producer epoch")
	newParsed(f, &c.storage, oneOf("auto", "tmpfs", "memfd"), "storage", "auto", "batch memory: auto, tmpfs (huge pages: as root, or without root in a user namespace of its own) or memfd")
	newParsed(f, &c.passthrough, oneOf("auto", "off"), "passthrough", "auto", "serve reads by FUSE passthrough: auto or off")
	newParsed(f, &c.deviceSpec, c.parseDevice, "device", "", "GPU to copy every batch to once, for CUDA IPC: cuda:N or GPU-<uuid>")
	newSize(f, &c.gpuBuffer, "gpu-buffer", "", false, "GPU memory for batches (with --device); default: --buffer")
	newSize(f, &c.gpuSlab, "gpu-slab", "", false, "with --ingest --device: GPU memory per batch; default: --gpu-buffer/8")
	f.StringVar(&c.metricsListen, "metrics-listen", "", "also serve metrics (GET /metrics, Prometheus text) and status.json over HTTP at this address, e.g. :9464")
	f.BoolVar(&c.debug, "debug", false, "log every FUSE request")
	f.BoolVar(&c.allowOther, "allow-other", false, "let other users in (each consumer directory stays its maker's)")
	f.DurationVar(&c.idleExit, "idle-exit", 0, "unmount and exit after this long with no consumer (the buffer is held for the next to join until then); 0: never")
	if err := parseFlags(f, args); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return usagef("mount takes one MOUNTPOINT, got %d arguments", f.NArg())
	}
	c.mountpoint = f.Arg(0)
	if err := c.checkMode(f); err != nil {
		return err
	}
	if err := c.validate(); err != nil {
		return usageError{err}
	}
	return nil
}

// builtInFlags only make sense with the built-in pipeline (--source).
var builtInFlags = []string{"image-size", "workers", "layout", "transform", "decoder", "cache", "cache-dir", "shard-memory", "shard-disk", "shard-disk-dir", "shard-index", "s3-endpoint", "s3-retry-for", "fetch", "rescan", "keep", "columns", "node"}

// defaultRemoteFetch keeps a store 30 ms away busy enough for about
// 2,000 images a second (64 / 0.03 s): more than the decoders of a
// 16-core node make.
const defaultRemoteFetch = 64

// checkMode checks that exactly one of --source and --ingest is given,
// with only the flags that mode uses.
func (c *mountCommand) checkMode(f *pflag.FlagSet) error {
	switch {
	case c.source == "" && !c.ingestMode:
		return usagef("--source DIR or --ingest is required")
	case c.source != "" && c.ingestMode:
		return usagef("--source and --ingest: give one")
	case !c.ingestMode:
		for _, name := range []string{"samples", "order", "gpu-slab"} {
			if f.Changed(name) {
				return usagef("--%s is for --ingest", name)
			}
		}
		if f.Changed("columns") && !source.IsParquetSpec(c.source) {
			return usagef("--columns is for Parquet files (a --source ending in .parquet), not %s", remote.Redact(c.source))
		}
		if c.cfg.Rescan && (source.IsS3Spec(c.source) || source.IsShardSpec(c.source) || strings.HasPrefix(c.source, "synthetic:")) {
			return usagef("--rescan: only a local folder can be listed again, not %s", remote.Redact(c.source))
		}
		return c.nodeFromSlurm(f)
	}
	for _, name := range builtInFlags {
		if f.Changed(name) {
			return usagef("--%s is for the built-in pipeline (--source), not --ingest", name)
		}
	}
	samplesLimit := min(maxSamples(), math.MaxInt32) // a batch carries its indices as int32s
	switch {
	case c.ingestCfg.Samples < 0 || int64(c.ingestCfg.Samples) > samplesLimit:
		return usagef("--samples %d: must be 0 (unordered) to %d: the order takes 16 bytes a sample, and no more than half this machine's memory",
			c.ingestCfg.Samples, samplesLimit)
	case f.Changed("order") && c.ingestCfg.Samples == 0:
		return usagef("--order needs --samples (ordered mode)")
	case f.Changed("gpu-slab") && c.device == "":
		return usagef("--gpu-slab %s: needs --device", f.Lookup("gpu-slab").Value)
	}
	c.ingestCfg.Shuffle = c.order == "shuffle"
	return nil
}

// validate checks flag values before anything is touched.
func (c *mountCommand) validate() error {
	switch {
	case c.cfg.BatchSize < 1 || c.cfg.BatchSize > batchstore.MaxBatchSize:
		return fmt.Errorf("--batch-size %d: must be 1 to %d", c.cfg.BatchSize, batchstore.MaxBatchSize)
	case c.cfg.ImageSize < 1 || c.cfg.ImageSize > 4096:
		return fmt.Errorf("--image-size %d: must be 1 to 4096", c.cfg.ImageSize)
	case c.cfg.Epochs < 0:
		return fmt.Errorf("--epochs %d: must be 0 (forever) or more", c.cfg.Epochs)
	case c.cfg.Workers < 0 || c.cfg.Workers > maxWorkers:
		return fmt.Errorf("--workers %d: must be 0 (one per core) to %d", c.cfg.Workers, maxWorkers)
	case c.eviction.Timeout < time.Millisecond:
		return fmt.Errorf("--consumer-timeout %s: must be at least 1ms", c.eviction.Timeout)
	case c.shardMemory > machineMemory()/2:
		return fmt.Errorf("--shard-memory %s: over half this machine's memory (%s): hold more pieces on a local disk with --shard-disk",
			c.flags.Lookup("shard-memory").Value, humanize.IBytes(uint64(machineMemory())))
	case c.s3.RetryFor < 0:
		return fmt.Errorf("--s3-retry-for %s: must be 0 (fail at the first fault) or more", c.s3.RetryFor)
	case c.idleExit < 0:
		return fmt.Errorf("--idle-exit %s: must be 0 (never) or positive", c.idleExit)
	}
	if c.cfg.Node.Count > 1 && c.cfg.Rescan {
		return fmt.Errorf("--rescan with --node %d/%d%s: a folder that grows on one node would be cut into other runs than the other nodes cut", c.cfg.Node.Index, c.cfg.Node.Count, fromText(c.nodeFrom))
	}
	if c.gpuBuffer > 0 && c.device == "" {
		return fmt.Errorf("--gpu-buffer %s: needs --device", c.flags.Lookup("gpu-buffer").Value)
	}
	if err := c.resolveKeep(); err != nil {
		return err
	}
	if c.fetchAuto && source.IsS3Spec(c.source) {
		c.cfg.Fetch = defaultRemoteFetch
	}
	if c.cacheSize > 0 && strings.HasPrefix(c.source, "synthetic:") {
		return fmt.Errorf("--cache %s: a synthetic source has no files to cache", c.flags.Lookup("cache").Value)
	}
	if err := c.resolveShardIndex(); err != nil {
		return err
	}
	if c.cacheDir != "" {
		if c.cacheSize == 0 {
			return fmt.Errorf("--cache-dir %s: needs --cache SIZE, the most it may hold", c.cacheDir)
		}
		if st, err := os.Stat(c.cacheDir); err != nil || !st.IsDir() {
			return fmt.Errorf("--cache-dir %s: not a directory", c.cacheDir)
		}
	}
	return nil
}

// parseNode reads --node K/N.
func parseNode(s string) (producer.Node, error) {
	k, n, ok := strings.Cut(s, "/")
	ki, kerr := strconv.Atoi(k)
	ni, nerr := strconv.Atoi(n)
	node := producer.Node{Index: ki, Count: ni}
	if !ok || kerr != nil || nerr != nil || ni < 1 || node.Validate() != nil || ni > maxNodes {
		return producer.Node{}, fmt.Errorf("%q: want K/N, this node K of N nodes (0 ≤ K < N ≤ %d), as 1/4", s, maxNodes)
	}
	return node, nil
}

// maxNodes bounds --node's N: a typo must not cut the data a million ways.
const maxNodes = 65536

// nodeFromSlurm defaults --node from Slurm's SLURM_NODEID and
// SLURM_NNODES, which srun sets in every step of a job: one tsock a node
// of a multi-node job serves that node's share. Without them, or with
// --node given, nothing changes.
func (c *mountCommand) nodeFromSlurm(f *pflag.FlagSet) error {
	if f.Changed("node") {
		return nil
	}
	id, nodes := os.Getenv("SLURM_NODEID"), os.Getenv("SLURM_NNODES")
	if id == "" || nodes == "" {
		c.cfg.Node = producer.Node{Index: 0, Count: 1}
		return nil
	}
	node, err := parseNode(id + "/" + nodes)
	if err != nil {
		return usagef("SLURM_NODEID=%s SLURM_NNODES=%s (the default of --node): %v; give --node K/N", id, nodes, err)
	}
	c.cfg.Node, c.nodeFrom = node, "SLURM_NODEID/SLURM_NNODES"
	return nil
}

// resolveKeep settles --keep: auto keeps as much as --buffer with a
// deterministic transform, nothing with random crops; a size asks for
// the deterministic one.
func (c *mountCommand) resolveKeep() error {
	if c.keepAuto {
		c.cfg.Keep = 0
		if c.cfg.Transform == pipeline.Eval {
			c.cfg.Keep = c.buffer
		}
		return nil
	}
	if c.cfg.Keep > 0 && c.cfg.Transform != pipeline.Eval {
		return fmt.Errorf("--keep %s: only --transform eval makes the same bytes every epoch", c.flags.Lookup("keep").Value)
	}
	return nil
}

// parseDevice reads --device, keeping its words for messages.
func (c *mountCommand) parseDevice(s string) (gpu.DeviceSpec, error) {
	spec, err := gpu.ParseDevice(s)
	if err == nil {
		c.device = s
	}
	return spec, err
}
