package main

import (
	"cmp"
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

// mountCommand is "tsock mount": the command parses and checks its flags
// (mountflags.go) into mountFlags, and Run hands them to a daemon, which
// serves until a signal or umount.
type mountCommand struct {
	stdout io.Writer
	flags  *pflag.FlagSet
	mountFlags
	d *daemon // what Run started; nil before
}

// Run serves the mount the flags describe until ctx ends or the file
// system is unmounted from outside.
func (c *mountCommand) Run(ctx context.Context) error {
	c.d = &daemon{stdout: c.stdout, mountFlags: c.mountFlags}
	return c.d.Run(ctx)
}

// Close frees what Run made.
func (c *mountCommand) Close() error {
	if c.d == nil {
		return nil
	}
	return c.d.Close()
}

// daemon is a mount being served: the store, the producer or ingest, the
// file system, status and metrics, all made from the command's checked
// flags, which it does not change. Its status renderers (status.go,
// statusdoc.go, metrics.go) read one snapshot a request (snapshot.go).
type daemon struct {
	stdout io.Writer
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
	node         *nodeDoc             // across nodes (--node K/N, N > 1); nil on one
}

// Run mounts, produces, and serves until ctx ends or the file system is
// unmounted from outside.
func (d *daemon) Run(ctx context.Context) error {
	// The source's remote requests end with Run, however it ends (a
	// signal, umount, --idle-exit), so no retry holds the exit up.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := d.listenMetrics(); err != nil {
		return err
	}
	if err := d.setUp(ctx); err != nil {
		if d.metricsHTTP != nil {
			d.metricsHTTP.listener.Close()
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
	if d.ingest != nil {
		fmt.Fprintf(d.stdout, "tsock: mounted %s: %s; producers write %s/ingest/; %s\n", d.mounted.Dir,
			d.ingestDescription(), d.mounted.Dir, d.mounted.SharedPath())
		produced = nil // nothing to produce: serve until the end
	} else {
		fmt.Fprintf(d.stdout, "tsock: mounted %s: %s, %d samples in %d classes; %s\n", d.mounted.Dir,
			printable(d.cfg.Source.Describe()), d.cfg.Source.Len(), len(d.cfg.Source.Classes()), d.mounted.SharedPath())
		workers.Go(func() { produced <- d.producer.Run(ctx) })
	}
	workers.Go(func() { d.rate.run(ctx) })
	if d.metricsHTTP != nil {
		workers.Go(func() { d.metricsHTTP.run(ctx) })
	}
	workers.Go(func() { d.store.Watch(ctx, d.eviction) })
	idle := make(chan struct{}) // closed after --idle-exit without a consumer
	if d.idleExit > 0 {
		workers.Go(func() { d.watchIdle(ctx, idle) })
	}
	var err error
	select {
	case <-ctx.Done():
	case <-d.unmounted:
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
		case <-d.unmounted:
		case <-idle:
		}
	}
	select {
	case <-d.unmounted:
		slog.Info("unmounted from outside", "mountpoint", d.mounted.Dir)
	default:
		if ctx.Err() != nil {
			slog.Info("signal received: unmounting", "mountpoint", d.mounted.Dir)
		}
	}
	cancel()
	if produced != nil {
		<-produced // it returns nil once ctx is cancelled
	}
	// A run whose producer failed (every sample skipped, say) exits 1,
	// whoever ended it.
	if failure := d.store.Failure(); failure != nil {
		return fmt.Errorf("producer stopped: %w", failure)
	}
	return err
}

// watchIdle closes idle once no consumer has been active for --idle-exit:
// a mount nobody reads would otherwise hold its buffer for good.
func (d *daemon) watchIdle(ctx context.Context, idle chan<- struct{}) {
	t := time.NewTicker(max(min(d.idleExit/4, time.Second), time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if since := d.store.Snapshot().Unwatched; !since.IsZero() && time.Since(since) >= d.idleExit {
				slog.Info("no consumer: unmounting (--idle-exit)", "for", d.idleExit, "mountpoint", d.mounted.Dir)
				close(idle)
				return
			}
		}
	}
}

// setUp opens the source and wires store, storage, producer and mount.
func (d *daemon) setUp(ctx context.Context) error {
	// Fail in a second, not after indexing a dataset (a Slurm job holds
	// its nodes meanwhile).
	if err := fs.CheckMountable(d.mountpoint); err != nil {
		return err
	}
	limit := d.buffer
	if d.ingestMode {
		return d.setUpIngest(limit)
	}
	src, err := d.openSource(ctx)
	if err != nil {
		return err
	}
	d.logArrangement(src)
	d.cfg.Source = src
	d.warnShuffle()
	// Listing or indexing a large source leaves garbage (a string per
	// file while a class is listed): give it back now, so that what the
	// daemon holds after the mount is what it keeps.
	debug.FreeOSMemory()
	tuneGC()
	if err := d.setUpGPU(limit); err != nil {
		return err
	}
	storeCfg := producer.StoreConfig(d.cfg, limit)
	if n := storeCfg.Node; n.Count > 1 {
		d.node = &nodeDoc{Index: n.Index, Count: n.Count, From: d.nodeFrom,
			Fingerprint: producer.NodeFingerprint(src, d.cfg.Seed, n.Count, n.Order)}
		slog.Info("serving one node's share of each consumer's data", "node", fmt.Sprintf("%d/%d", n.Index, n.Count),
			"from", cmp.Or(d.nodeFrom, "--node"), "fingerprint", d.node.Fingerprint)
	}
	if err := d.newStore(storeCfg); err != nil {
		return err
	}
	if d.producer, err = producer.New(d.cfg, d.store, d.alloc); err != nil {
		return err
	}
	d.cfg = d.producer.Config()
	if os.Getenv("GOMAXPROCS") == "" { // a user's own setting stands
		runtime.GOMAXPROCS(producer.GoProcs(d.cfg.Workers))
	}
	return d.mount(nil)
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
func (d *daemon) setUpIngest(limit int64) error {
	var err error
	if err = d.setUpGPU(limit); err != nil {
		return err
	}
	err = d.newStore(batchstore.Config{
		Limit: limit, BatchSize: d.cfg.BatchSize, Epochs: d.cfg.Epochs, Samples: d.ingestCfg.Samples,
		Measure: batchfile.Measure, Unordered: d.ingestCfg.Samples == 0,
	})
	if err != nil {
		return err
	}
	d.ingestCfg.Seed, d.ingestCfg.MaxSamples = d.cfg.Seed, int(min(maxSamples(), math.MaxInt32))
	d.ingestCfg.MaxSkipped = d.cfg.MaxSkipped
	d.ingest = ingest.New(d.ingestCfg, d.store, d.alloc)
	return d.mount(ingestFiles{d})
}

// parseSubset reads a consumer's subset file against this mount's data.
func (d *daemon) parseSubset(text []byte) (*batchstore.Subset, error) {
	ds := batchstore.Dataset{Seed: d.cfg.Seed}
	if d.ingest != nil {
		ds.Len = d.ingest.Samples()
	}
	if d.ingest != nil && ds.Len == 0 {
		return nil, fmt.Errorf("an unordered ingest (no --samples) has no dataset indices to pick by: %w", batchstore.ErrBadSubset)
	}
	if d.ingest == nil {
		src := d.cfg.Source
		ds.Len, ds.Label, ds.Classes = src.Len(), src.Label, src.Classes()
	}
	return batchstore.ParseSubset(text, ds)
}

// subsetBytes is the most a subset of this mount's dataset can take
// written: every index once, as a text line or an int64, and room for
// blank lines and a form.
func (d *daemon) subsetBytes() int64 {
	n := int64(0)
	if d.ingest != nil {
		n = int64(d.ingest.Samples())
	} else if d.cfg.Source != nil {
		n = int64(d.cfg.Source.Len())
	}
	digits := int64(len(strconv.FormatInt(max(n-1, 0), 10)))
	return max(n*(digits+2), 8*n) + 4096
}

// mount serves the store at the mountpoint.
func (d *daemon) mount(in fs.Ingest) error {
	probe, err := d.alloc.Create(4096)
	if err != nil {
		return err
	}
	defer probe.Free()
	d.rate = newRateMeter(d.store)
	if rs, ok := source.As[source.Remote](d.cfg.Source); ok && rs.Store() != nil {
		d.rate.remote = rs.Store().Stats.Bytes.Load
	}
	opts := fs.Options{
		Status: d.status, State: d.state, Metrics: d.metrics, StatusJSON: d.statusJSON, Compose: compose, Passthrough: d.passthrough == "auto",
		Backing: d.alloc.Describe(), ProbeFd: probe.Fd(), Debug: d.debug, Ingest: in, AllowOther: d.allowOther,
	}
	if d.ingest == nil {
		opts.Classes = d.classes
	}
	opts.ParseSubset, opts.SubsetBytes = d.parseSubset, d.subsetBytes
	if d.gpu != nil {
		opts.CUDA, opts.GPU = batchfile.NewCUDAFiles(d.gpu.pool), d.gpu.files()
	}
	// Handlers (status, ingest/status) read d.mounted: set before serving.
	opts.Serving = func(m *fs.Mounted) { d.mounted = m }
	if _, err = fs.Mount(d.mountpoint, d.store, opts); err != nil {
		return err
	}
	// Closed once the file system is gone (Close's unmount, or umount(8));
	// Close waits for this goroutine.
	d.unmounted = make(chan struct{})
	go func() { d.mounted.Wait(); close(d.unmounted) }()
	return nil
}

// newStore makes the batch storage and the store over it, which counts
// the memory that readers' mappings keep after release as the storage
// reports it.
func (d *daemon) newStore(cfg batchstore.Config) error {
	var err error
	if d.alloc, err = newAllocator(d.storage); err != nil {
		return err
	}
	cfg.JoinAtEpoch = d.join == "epoch"
	cfg.MaxBatches = d.gpu.slabs()
	cfg.Lingering = d.alloc.Lingering
	d.store = batchstore.New(cfg)
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
	// Without root: a huge-page tmpfs of the daemon's own user namespace,
	// whose files the user's readers may open through /proc/PID/fd,
	// around FUSE (fs: the direct path).
	self, serr := os.Executable()
	if serr == nil {
		var uerr error
		if a, uerr = memfile.NewUserTmpfs(self, os.TempDir()); uerr == nil {
			return a, nil
		}
		err = fmt.Errorf("%w; %w", err, uerr)
	}
	if kind == "tmpfs" {
		return nil, err
	}
	slog.Info("huge-page tmpfs unavailable, keeping batches in memfds", "err", err)
	return memfile.NewMemFD(), nil
}

// Close unmounts and frees everything; safe after a failed Run.
func (d *daemon) Close() error {
	var errs []error
	if d.store != nil {
		d.store.Shutdown() // wake blocked lookups, or unmount waits for them
	}
	if d.mounted != nil {
		errs = append(errs, d.mounted.Unmount())
		// The server ends with the mount. Where a busy mount was detached
		// lazily (a shell cd'ed into it), the kernel keeps it alive until
		// it is left: do not hang the daemon's exit on that.
		select {
		case <-d.unmounted:
		case <-time.After(5 * time.Second):
			slog.Warn("the detached mount is still busy; exiting without waiting for it", "mountpoint", d.mounted.Dir)
		}
	}
	if d.store != nil {
		errs = append(errs, d.store.Close())
	}
	if d.alloc != nil {
		errs = append(errs, d.alloc.Close())
	}
	if d.gpu != nil { // after the store: its batches hold slabs
		errs = append(errs, d.gpu.Close())
	}
	if cl, ok := d.cfg.Source.(io.Closer); ok { // after the producer: Run has returned
		errs = append(errs, cl.Close())
	}
	return errors.Join(errs...)
}

// compose adapts the batch format's re-batching to the file system's.
func compose(ref batchstore.Ref, blobs map[uint64]batchstore.Blob, consumer string) (fs.BatchData, error) {
	return batchfile.Compose(ref, blobs, consumer)
}
