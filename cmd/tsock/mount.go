package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/fs"
	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/ingest"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote"
)

// mountCommand is "tsock mount": it serves until a signal or umount.
type mountCommand struct {
	stdout io.Writer
	flags  *pflag.FlagSet
	mountFlags

	// What Run makes, Close frees.
	store        *batchstore.Store
	alloc        *memfile.Allocator
	producer     *producer.Producer // nil with --ingest
	ingest       *ingest.Ingest     // nil without --ingest
	cache        *source.Cache      // nil without --cache
	gpu          *gpuMode           // nil without --device
	mounted      *fs.Mounted
	unmounted    chan struct{} // closed when the file system is gone
	rate         *rateMeter
	metricsHTTP  *metricsServer // serves --metrics-listen
	registryOnce sync.Once
	reg          *prometheus.Registry // the metrics (metrics.go)
}

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

	buffer    int64 // bytes for batches
	cacheSize int64 // 0: no --cache
	cacheDir  string
	// shardMemory: bytes of whole tar shards held at once (read ahead and
	// shuffled across); 0: each sample read alone.
	shardMemory int64
	shardDisk   diskFlags
	shardIndex  string // the tar shards' index file: "" for none
	noIndex     string // why none is kept, for status ("" with one)
	keepAuto    bool   // --keep auto: as much as --buffer with eval, else none
	fetchAuto   bool   // --fetch auto: defaultRemoteFetch for s3://, else 0

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
	f.StringVar(&c.source, "source", "", "image folder in ImageFolder form, WebDataset tar shards ('DIR/train-{000000..000099}.tar', globs too; or s3://BUCKET/KEYS.tar), or synthetic:N")
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
	newSize(f, &c.shardMemory, "shard-memory", "512MiB", true, "memory for tar shards read whole (or in pieces of 8 MiB or more), once an epoch (one request a piece), ahead of the workers, and shuffled across; 0: read each sample alone (a ranged request each)")
	c.shardDisk.add(f)
	f.StringVar(&c.shardIndex, "shard-index", "", "where the tar shards' index is kept (a `FILE`, or none): read at mount where it indexes these shards as they are (no shard read to index them), else written there, so that only a first mount reads the shards to index them; a file on a shared file system serves every node (default: one per dataset under $XDG_CACHE_HOME or ~/.cache, in tsock/shard-index/)")
	f.StringVar(&c.cacheDir, "cache-dir", "", "keep the --cache in an unnamed file in this directory (a local disk), not in memory: for datasets larger than memory; gone when the mount ends")
	newAutoSize(f, &c.keepAuto, &c.cfg.Keep, "keep", "with --transform eval: memory for the samples made in the first epoch, copied into later ones with no decode; auto: as much as --buffer (0 with train)")
	f.BoolVar(&c.cfg.Rescan, "rescan", false, "list a local folder --source again at each producer epoch: new files join the data (new indices after the others), vanished ones are skipped")
	newAutoCount(f, &c.fetchAuto, &c.cfg.Fetch, producer.MaxFetch, "fetch", fmt.Sprintf("images read ahead of the workers, this many requests in flight: auto (%d for s3:// sources, 0 for local ones) or 0 to %d", defaultRemoteFetch, producer.MaxFetch))
	newParsed(f, &c.cfg.MaxSkipped, batchstore.ParseSkipBudget, "max-skipped", batchstore.DefaultSkipBudget,
		"samples a run may skip for their own bytes (corrupt, unreadable), a count or a percentage of the dataset; past it the run fails instead of delivering short epochs")
	f.IntVar(&c.cfg.Workers, "workers", 0, "decoding workers; 0 means one per core")
	f.Uint64Var(&c.cfg.Seed, "seed", 0, "seed of shuffles and crops")
	newParsed(f, &c.cfg.Layout, pipeline.ParseLayout, "layout", "nchw", "image axes: nchw or nhwc")
	newParsed(f, &c.cfg.Transform, pipeline.ParseTransform, "transform", "train", "train (random crop + flip, shuffled) or eval (centre crop, in order)")
	f.DurationVar(&c.eviction.Timeout, "consumer-timeout", 30*time.Second,
		"evict a consumer with no open file and no progress for this long while the buffer is full")
	newParsed(f, &c.eviction.Straggler, batchstore.ParseStraggler, "straggler", "block", "block: all wait for the slowest consumer; evict: evict one that holds a full buffer for --consumer-timeout")
	newParsed(f, &c.cfg.Decoder, oneOf(pipeline.DecoderAuto, pipeline.DecoderTurbo, pipeline.DecoderGo), "decoder", "auto", "JPEG decoder: auto (libjpeg-turbo if installed), turbo, or go")
	newParsed(f, &c.join, oneOf("any", "epoch"), "join", "any", "any: a consumer joins mid-epoch, its epochs stitched exact; epoch: it waits for the next producer epoch")
	newParsed(f, &c.storage, oneOf("auto", "tmpfs", "memfd"), "storage", "auto", "batch memory: auto, tmpfs (huge pages, needs root) or memfd")
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
var builtInFlags = []string{"image-size", "workers", "layout", "transform", "decoder", "cache", "cache-dir", "shard-memory", "shard-disk", "shard-disk-dir", "shard-index", "s3-endpoint", "s3-retry-for", "fetch", "rescan", "keep"}

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
		if c.cfg.Rescan && (source.IsS3Spec(c.source) || source.IsShardSpec(c.source) || strings.HasPrefix(c.source, "synthetic:")) {
			return usagef("--rescan: only a local folder can be listed again, not %s", remote.Redact(c.source))
		}
		return nil
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

// Run mounts, produces, and serves until ctx ends or the file system is
// unmounted from outside.
func (c *mountCommand) Run(ctx context.Context) error {
	// The source's remote requests end with Run, however it ends (a
	// signal, umount, --idle-exit), so no retry holds the exit up.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := c.listenMetrics(); err != nil {
		return err
	}
	if err := c.setUp(ctx); err != nil {
		if c.metricsHTTP != nil {
			c.metricsHTTP.listener.Close()
		}
		if ctx.Err() != nil { // a signal while the source was opened: a clean stop, as while serving
			slog.Info("signal received while the source was opened: stopped, nothing mounted, no index kept", "err", err)
			return nil
		}
		return err
	}
	// Every goroutine Run starts ends before it returns, but the one that
	// waits for the unmount: Close unmounts and waits for that one.
	var workers sync.WaitGroup
	defer workers.Wait()
	defer cancel()
	produced := make(chan error, 1)
	if c.ingest != nil {
		fmt.Fprintf(c.stdout, "tsock: mounted %s: %s; producers write %s/ingest/; %s\n", c.mounted.Dir,
			c.ingestDescription(), c.mounted.Dir, c.mounted.SharedPath())
		produced = nil // nothing to produce: serve until the end
	} else {
		fmt.Fprintf(c.stdout, "tsock: mounted %s: %s, %d samples in %d classes; %s\n", c.mounted.Dir,
			printable(c.cfg.Source.Describe()), c.cfg.Source.Len(), len(c.cfg.Source.Classes()), c.mounted.SharedPath())
		workers.Go(func() { produced <- c.producer.Run(ctx) })
	}
	workers.Go(func() { c.rate.run(ctx) })
	if c.metricsHTTP != nil {
		workers.Go(func() { c.metricsHTTP.run(ctx) })
	}
	workers.Go(func() { c.store.Watch(ctx, c.eviction) })
	idle := make(chan struct{}) // closed after --idle-exit without a consumer
	if c.idleExit > 0 {
		workers.Go(func() { c.watchIdle(ctx, idle) })
	}
	var err error
	select {
	case <-ctx.Done():
	case <-c.unmounted:
	case <-idle:
	case err = <-produced:
		produced = nil
		if err != nil {
			// Readers learn why from their errno and status; a mount that
			// vanished would tell them nothing.
			slog.Error("producer failed: serving what is held, and the failure to readers, until unmounted", "err", err)
		} else {
			slog.Info("every batch produced; serving the rest until unmounted")
		}
		select {
		case <-ctx.Done():
		case <-c.unmounted:
		case <-idle:
		}
	}
	select {
	case <-c.unmounted:
		slog.Info("unmounted from outside", "mountpoint", c.mounted.Dir)
	default:
		if ctx.Err() != nil {
			slog.Info("signal received: unmounting", "mountpoint", c.mounted.Dir)
		}
	}
	cancel()
	if produced != nil {
		<-produced // it returns nil once ctx is cancelled
	}
	// A run whose producer failed (every sample skipped, say) exits 1,
	// whoever ended it.
	if failure := c.store.Failure(); failure != nil {
		return fmt.Errorf("producer stopped: %w", failure)
	}
	return err
}

// watchIdle closes idle once no consumer has been active for --idle-exit:
// a mount nobody reads would otherwise hold its buffer for good.
func (c *mountCommand) watchIdle(ctx context.Context, idle chan<- struct{}) {
	t := time.NewTicker(max(min(c.idleExit/4, time.Second), time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if since := c.store.Snapshot().Unwatched; !since.IsZero() && time.Since(since) >= c.idleExit {
				slog.Info("no consumer: unmounting (--idle-exit)", "for", c.idleExit, "mountpoint", c.mounted.Dir)
				close(idle)
				return
			}
		}
	}
}

// setUp opens the source and wires store, storage, producer and mount.
func (c *mountCommand) setUp(ctx context.Context) error {
	// Fail in a second, not after indexing a dataset (a Slurm job holds
	// its nodes meanwhile).
	if err := fs.CheckMountable(c.mountpoint); err != nil {
		return err
	}
	limit := c.buffer
	if c.ingestMode {
		return c.setUpIngest(limit)
	}
	src, err := c.openSource(ctx)
	if err != nil {
		return err
	}
	if sh, ok := src.(*source.Shards); ok {
		if err := c.arrangeShards(sh); err != nil {
			return err
		}
	}
	if c.cacheSize > 0 {
		if c.cacheDir == "" {
			c.cache = source.NewCache(src, c.cacheSize)
		} else if c.cache, err = source.NewDiskCache(src, c.cacheSize, c.cacheDir); err != nil {
			return fmt.Errorf("--cache-dir: %w", err)
		}
		src = c.cache
	}
	c.cfg.Source = src
	c.warnShuffle()
	// Listing or indexing a large source leaves garbage (a string per
	// file while a class is listed): give it back now, so that what the
	// daemon holds after the mount is what it keeps.
	debug.FreeOSMemory()
	tuneGC()
	if err := c.setUpGPU(limit); err != nil {
		return err
	}
	if err := c.newStore(producer.StoreConfig(c.cfg, limit)); err != nil {
		return err
	}
	if c.producer, err = producer.New(c.cfg, c.store, c.alloc); err != nil {
		return err
	}
	c.cfg = c.producer.Config()
	if os.Getenv("GOMAXPROCS") == "" { // a user's own setting stands
		runtime.GOMAXPROCS(producer.GoProcs(c.cfg.Workers))
	}
	return c.mount(nil)
}

// setUpIngest wires store, storage and mount for outside producers.
// daemonGCPercent is the daemon's GOGC. Its heap is mostly long-lived
// arrays a sample (names, labels, each epoch's order): at Go's default of
// 100 it grows to twice them between collections, 171 MiB after 3 epochs
// of ImageNet's 1.28 M files, against 131 MiB at 50 for the same CPU
// (buffers are reused: a sample makes little garbage).
const daemonGCPercent = 50

// tuneGC sets the daemon's GOGC, unless the user set GOGC.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(daemonGCPercent)
	}
}

func (c *mountCommand) setUpIngest(limit int64) error {
	var err error
	if err = c.setUpGPU(limit); err != nil {
		return err
	}
	err = c.newStore(batchstore.Config{
		Limit: limit, BatchSize: c.cfg.BatchSize, Epochs: c.cfg.Epochs, Samples: c.ingestCfg.Samples,
		Measure: batchfile.Measure, Unordered: c.ingestCfg.Samples == 0,
	})
	if err != nil {
		return err
	}
	c.ingestCfg.Seed, c.ingestCfg.MaxSamples = c.cfg.Seed, int(min(maxSamples(), math.MaxInt32))
	c.ingestCfg.MaxSkipped = c.cfg.MaxSkipped
	c.ingest = ingest.New(c.ingestCfg, c.store, c.alloc)
	return c.mount(ingestFiles{c})
}

// parseSubset reads a consumer's subset file against this mount's data.
func (c *mountCommand) parseSubset(text []byte) (*batchstore.Subset, error) {
	d := batchstore.Dataset{Seed: c.cfg.Seed}
	if c.ingest != nil {
		d.Len = c.ingest.Samples()
	}
	if c.ingest != nil && d.Len == 0 {
		return nil, fmt.Errorf("an unordered ingest (no --samples) has no dataset indices to pick by: %w", batchstore.ErrBadSubset)
	}
	if c.ingest == nil {
		src := c.cfg.Source
		d.Len, d.Label, d.Classes = src.Len(), src.Label, src.Classes()
	}
	return batchstore.ParseSubset(text, d)
}

// subsetBytes is the most a subset of this mount's dataset can take
// written: every index once, as a text line or an int64, and room for
// blank lines and a form.
func (c *mountCommand) subsetBytes() int64 {
	n := int64(0)
	if c.ingest != nil {
		n = int64(c.ingest.Samples())
	} else if c.cfg.Source != nil {
		n = int64(c.cfg.Source.Len())
	}
	digits := int64(len(strconv.FormatInt(max(n-1, 0), 10)))
	return max(n*(digits+2), 8*n) + 4096
}

// mount serves the store at the mountpoint.
func (c *mountCommand) mount(in fs.Ingest) error {
	probe, err := c.alloc.Create(4096)
	if err != nil {
		return err
	}
	defer probe.Free()
	c.rate = newRateMeter(c.store)
	if rs, ok := source.As[source.Remote](c.cfg.Source); ok && rs.Store() != nil {
		c.rate.remote = rs.Store().Stats.Bytes.Load
	}
	opts := fs.Options{
		Status: c.status, State: c.state, Metrics: c.metrics, StatusJSON: c.statusJSON, Compose: compose, Passthrough: c.passthrough == "auto",
		Backing: c.alloc.Describe(), ProbeFd: probe.Fd(), Debug: c.debug, Ingest: in, AllowOther: c.allowOther,
	}
	if c.ingest == nil {
		opts.Classes = c.classes
	}
	opts.ParseSubset, opts.SubsetBytes = c.parseSubset, c.subsetBytes
	if c.gpu != nil {
		opts.CUDA, opts.GPU = batchfile.NewCUDAFiles(c.gpu.pool), c.gpu.files()
	}
	// Handlers (status, ingest/status) read c.mounted: set before serving.
	opts.Serving = func(m *fs.Mounted) { c.mounted = m }
	if _, err = fs.Mount(c.mountpoint, c.store, opts); err != nil {
		return err
	}
	// Closed once the file system is gone (Close's unmount, or umount(8));
	// Close waits for this goroutine.
	c.unmounted = make(chan struct{})
	go func() { c.mounted.Wait(); close(c.unmounted) }()
	return nil
}

// newStore makes the batch storage and the store over it, which counts
// the memory that readers' mappings keep after release as the storage
// reports it.
func (c *mountCommand) newStore(cfg batchstore.Config) error {
	var err error
	if c.alloc, err = newAllocator(c.storage); err != nil {
		return err
	}
	cfg.JoinAtEpoch = c.join == "epoch"
	cfg.MaxBatches = c.gpu.slabs()
	cfg.Lingering = c.alloc.Lingering
	c.store = batchstore.New(cfg)
	return nil
}

// newAllocator picks batch storage: huge-page tmpfs when allowed, else memfd.
func newAllocator(kind string) (*memfile.Allocator, error) {
	if kind == "memfd" {
		return memfile.NewMemFD(), nil
	}
	a, err := memfile.NewTmpfs(os.TempDir())
	if err == nil {
		return a, nil
	}
	if kind == "tmpfs" {
		return nil, err
	}
	slog.Info("huge-page tmpfs unavailable, keeping batches in memfds", "err", err)
	return memfile.NewMemFD(), nil
}

// Close unmounts and frees everything; safe after a failed Run.
func (c *mountCommand) Close() error {
	var errs []error
	if c.store != nil {
		c.store.Shutdown() // wake blocked lookups, or unmount waits for them
	}
	if c.mounted != nil {
		errs = append(errs, c.mounted.Unmount())
		// The server ends with the mount. Where a busy mount was detached
		// lazily (a shell cd'ed into it), the kernel keeps it alive until
		// it is left: do not hang the daemon's exit on that.
		select {
		case <-c.unmounted:
		case <-time.After(5 * time.Second):
			slog.Warn("the detached mount is still busy; exiting without waiting for it", "mountpoint", c.mounted.Dir)
		}
	}
	if c.store != nil {
		errs = append(errs, c.store.Close())
	}
	if c.alloc != nil {
		errs = append(errs, c.alloc.Close())
	}
	if c.gpu != nil { // after the store: its batches hold slabs
		errs = append(errs, c.gpu.Close())
	}
	if c.cache != nil { // after the producer: Run has returned
		errs = append(errs, c.cache.Close())
	}
	return errors.Join(errs...)
}

// compose adapts the batch format's re-batching to the file system's.
func compose(ref batchstore.Ref, blobs map[uint64]batchstore.Blob, consumer string) (fs.BatchData, error) {
	return batchfile.Compose(ref, blobs, consumer)
}
