package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/fs"
	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/batchfile"
)

// mountCommand is "tsock mount": it serves until a signal or umount.
type mountCommand struct {
	stdout io.Writer
	flags  *pflag.FlagSet

	mountpoint  string
	source      string
	buffer      string
	cacheSize   string
	device      string
	gpuBuffer   string
	storage     string
	passthrough string
	debug       bool
	eviction    batchstore.Eviction
	join        string
	cfg         producer.Config

	store    *batchstore.Store
	alloc    *memfile.Allocator
	producer *producer.Producer
	cache    *producer.Cache // nil without --cache
	gpu      *gpuMode        // nil without --device
	mounted  *fs.Mounted
	rate     *rateMeter
}

func (c *mountCommand) Usage() string {
	return flagUsage("usage: tsock mount MOUNTPOINT --source DIR|synthetic:N [flags]\n\n"+
		"Serves preprocessed batches: mkdir MOUNTPOINT/consumers/NAME, then read\n"+
		"MOUNTPOINT/consumers/NAME/000000.safetensors, 000001.safetensors, ...", c.flags)
}

func (c *mountCommand) Parse(args []string) error {
	f := newFlagSet("mount")
	c.flags = f
	var layout, transform, straggler, join string
	f.StringVar(&c.source, "source", "", "image folder in ImageFolder form, or synthetic:N")
	f.IntVar(&c.cfg.BatchSize, "batch-size", 256, "samples per batch")
	f.IntVar(&c.cfg.ImageSize, "image-size", 224, "side of the square output images, pixels")
	f.IntVar(&c.cfg.Epochs, "epochs", 1, "epochs to produce; 0 means forever")
	f.StringVar(&c.buffer, "buffer", "2GiB", "memory for batches, all consumers together")
	f.StringVar(&c.cacheSize, "cache", "0", "memory for encoded files kept after their first read, so later epochs read no disk; 0: off")
	f.IntVar(&c.cfg.Workers, "workers", 0, "decoding workers; 0 means one per core")
	f.Uint64Var(&c.cfg.Seed, "seed", 0, "seed of shuffles and crops")
	f.StringVar(&layout, "layout", "nchw", "image axes: nchw or nhwc")
	f.StringVar(&transform, "transform", "train", "train (random crop + flip, shuffled) or eval (centre crop, in order)")
	f.DurationVar(&c.eviction.Timeout, "consumer-timeout", 30*time.Second,
		"evict a consumer with no open file and no progress for this long while the buffer is full")
	f.StringVar(&straggler, "straggler", "block", "block: all wait for the slowest consumer; evict: evict one that holds a full buffer for --consumer-timeout")
	f.StringVar(&c.cfg.Decoder, "decoder", "auto", "JPEG decoder: auto (libjpeg-turbo if installed), turbo, or go")
	f.StringVar(&join, "join", "any", "any: a consumer joins mid-epoch, its epochs stitched exact; epoch: it waits for the next producer epoch")
	f.StringVar(&c.storage, "storage", "auto", "batch memory: auto, tmpfs (huge pages, needs root) or memfd")
	f.StringVar(&c.passthrough, "passthrough", "auto", "serve reads by FUSE passthrough: auto or off")
	f.StringVar(&c.device, "device", "", "GPU to copy every batch to once, for CUDA IPC: cuda:N or GPU-<uuid>")
	f.StringVar(&c.gpuBuffer, "gpu-buffer", "", "GPU memory for batches (with --device); default: --buffer")
	f.BoolVar(&c.debug, "debug", false, "log every FUSE request")
	if err := parseFlags(f, args); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return usagef("mount takes one MOUNTPOINT, got %d arguments", f.NArg())
	}
	c.mountpoint = f.Arg(0)
	if c.source == "" {
		return usagef("--source is required")
	}
	c.cfg.Layout, c.cfg.Transform = producer.Layout(layout), producer.Transform(transform)
	c.eviction.Straggler = batchstore.Straggler(straggler)
	c.join = join
	if err := c.validate(); err != nil {
		return usageError{err}
	}
	return nil
}

// validate checks flag values before anything is touched.
func (c *mountCommand) validate() error {
	switch {
	case c.cfg.BatchSize < 1:
		return fmt.Errorf("--batch-size %d: must be at least 1", c.cfg.BatchSize)
	case c.cfg.ImageSize < 1 || c.cfg.ImageSize > 4096:
		return fmt.Errorf("--image-size %d: must be 1 to 4096", c.cfg.ImageSize)
	case c.cfg.Epochs < 0:
		return fmt.Errorf("--epochs %d: must be 0 (forever) or more", c.cfg.Epochs)
	case c.cfg.Workers < 0:
		return fmt.Errorf("--workers %d: must be 0 (one per core) or more", c.cfg.Workers)
	case c.storage != "auto" && c.storage != "tmpfs" && c.storage != "memfd":
		return fmt.Errorf("--storage %q: want auto, tmpfs or memfd", c.storage)
	case c.passthrough != "auto" && c.passthrough != "off":
		return fmt.Errorf("--passthrough %q: want auto or off", c.passthrough)
	case c.cfg.Decoder != producer.DecoderAuto && c.cfg.Decoder != producer.DecoderTurbo && c.cfg.Decoder != producer.DecoderGo:
		return fmt.Errorf("--decoder %q: want auto, turbo or go", c.cfg.Decoder)
	case c.join != "any" && c.join != "epoch":
		return fmt.Errorf("--join %q: want any or epoch", c.join)
	case c.eviction.Timeout <= 0:
		return fmt.Errorf("--consumer-timeout %s: must be positive", c.eviction.Timeout)
	}
	if _, err := batchstore.ParseStraggler(string(c.eviction.Straggler)); err != nil {
		return fmt.Errorf("--straggler: %w", err)
	}
	if _, err := producer.ParseLayout(string(c.cfg.Layout)); err != nil {
		return fmt.Errorf("--layout: %w", err)
	}
	if _, err := producer.ParseTransform(string(c.cfg.Transform)); err != nil {
		return fmt.Errorf("--transform: %w", err)
	}
	if _, err := parseSize("buffer", c.buffer); err != nil {
		return err
	}
	if c.device != "" {
		if _, err := gpu.ParseDevice(c.device); err != nil {
			return fmt.Errorf("--device: %w", err)
		}
	}
	if c.gpuBuffer != "" {
		if c.device == "" {
			return fmt.Errorf("--gpu-buffer %s: needs --device", c.gpuBuffer)
		}
		if _, err := parseSize("gpu-buffer", c.gpuBuffer); err != nil {
			return err
		}
	}
	if c.cacheSize != "0" {
		if _, err := parseSize("cache", c.cacheSize); err != nil {
			return err
		}
		if strings.HasPrefix(c.source, "synthetic:") {
			return fmt.Errorf("--cache %s: a synthetic source has no files to cache", c.cacheSize)
		}
	}
	return nil
}

// Run mounts, produces, and serves until ctx ends or the file system is
// unmounted from outside.
func (c *mountCommand) Run(ctx context.Context) error {
	if err := c.setUp(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "tsock: mounted %s: %s, %d samples in %d classes; %s\n", c.mounted.Dir,
		c.cfg.Source.Describe(), c.cfg.Source.Len(), len(c.cfg.Source.Classes()), c.mounted.SharedPath())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	produced := make(chan error, 1)
	go func() { produced <- c.producer.Run(ctx) }()
	go c.rate.run(ctx)
	go c.store.Watch(ctx, c.eviction)
	unmounted := make(chan struct{})
	go func() { c.mounted.Wait(); close(unmounted) }()
	var err error
	select {
	case <-ctx.Done():
	case <-unmounted:
	case err = <-produced:
		produced = nil
		if err != nil {
			err = fmt.Errorf("producer stopped: %w", err)
			break
		}
		slog.Info("every batch produced; serving the rest until unmounted")
		select {
		case <-ctx.Done():
		case <-unmounted:
		}
	}
	select {
	case <-unmounted:
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
	return err
}

// setUp opens the source and wires store, storage, producer and mount.
func (c *mountCommand) setUp() error {
	limit, _ := parseSize("buffer", c.buffer)
	src, err := producer.Open(c.source)
	if err != nil {
		return err
	}
	if c.cacheSize != "0" {
		size, _ := parseSize("cache", c.cacheSize)
		if enc, ok := src.(producer.EncodedSource); ok {
			c.cache = producer.NewCache(enc, size)
			src = c.cache
		}
	}
	c.cfg.Source = src
	storeCfg := producer.StoreConfig(c.cfg, limit)
	storeCfg.JoinAtEpoch = c.join == "epoch"
	c.store = batchstore.New(storeCfg)
	if err := c.setUpGPU(limit); err != nil {
		return err
	}
	if c.alloc, err = newAllocator(c.storage); err != nil {
		return err
	}
	if c.producer, err = producer.New(c.cfg, c.store, c.alloc); err != nil {
		return err
	}
	c.cfg = c.producer.Config()
	probe, err := c.alloc.Create(4096)
	if err != nil {
		return err
	}
	defer probe.Free()
	c.rate = newRateMeter(c.store)
	opts := fs.Options{
		Status: c.status, Metrics: c.metrics, Compose: compose, Passthrough: c.passthrough == "auto",
		Backing: c.alloc.Describe(), ProbeFd: probe.Fd(), Debug: c.debug,
	}
	if c.gpu != nil {
		opts.CUDA, opts.GPU = producer.NewCUDAFiles(c.gpu.pool), c.gpu.files()
	}
	c.mounted, err = fs.Mount(c.mountpoint, c.store, opts)
	return err
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
	return errors.Join(errs...)
}

// compose adapts the batch format's re-batching to the file system's.
func compose(ref batchstore.Ref, blobs map[uint64]batchstore.Blob, consumer string) (fs.BatchData, error) {
	return batchfile.Compose(ref, blobs, consumer)
}
