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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/fs"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/ingest"
	"github.com/tsock/tsock/producer/source"
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
	opened       time.Time          // when opening the source began
	gpu          *gpuMode           // nil without --device
	mounted      *fs.Mounted
	unmounted    chan struct{} // closed when the file system is gone
	rate         *rateMeter
	metricsHTTP  *metricsServer // serves --metrics-listen
	registryOnce sync.Once
	reg          *prometheus.Registry // the metrics (metrics.go)
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
	c.logArrangement(src)
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

// setUpIngest wires store, storage and mount for outside producers.
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
	if cl, ok := c.cfg.Source.(io.Closer); ok { // after the producer: Run has returned
		errs = append(errs, cl.Close())
	}
	return errors.Join(errs...)
}

// compose adapts the batch format's re-batching to the file system's.
func compose(ref batchstore.Ref, blobs map[uint64]batchstore.Blob, consumer string) (fs.BatchData, error) {
	return batchfile.Compose(ref, blobs, consumer)
}
