package producer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/skipbudget"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote"
)

// Config is what the producer makes.
type Config struct {
	Source    source.Source
	BatchSize int
	ImageSize int
	Epochs    int // 0: forever
	Workers   int // 0: one per core
	Seed      uint64
	Layout    pipeline.Layout
	Transform pipeline.Transform
	Decoder   string // auto, turbo or go
	// Keep, with a deterministic transform (Eval), is how many bytes of
	// made samples to keep after their first making, so that later
	// epochs copy them instead of decoding (--keep); 0: none.
	Keep int64
	// Rescan lists a local folder source again at each producer epoch
	// boundary (--rescan): new files get new indices after the others.
	Rescan bool
	// Fetch is how many reads of encoded samples may be in flight ahead of
	// the workers, in the dispatcher's order (a remote source's round
	// trips overlap); 0: each worker reads its own.
	Fetch int
	// GPU, if set, gets a copy of every batch's data in one of its slabs
	// before the batch is published (--device).
	GPU *gpu.Pool
	// MaxSkipped bounds the samples skipped for their own bytes
	// (--max-skipped); past it the run fails. The zero value bounds
	// nothing.
	MaxSkipped skipbudget.Budget
	// Node is this node among several (--node); the zero value is one.
	Node Node
}

// Validate checks the numbers a user gives.
func (c *Config) Validate() error {
	switch {
	case c.Source == nil:
		return errors.New("no source")
	case c.BatchSize <= 0:
		return fmt.Errorf("batch size %d: must be at least 1", c.BatchSize)
	case c.ImageSize <= 0 || c.ImageSize > 4096:
		return fmt.Errorf("image size %d: must be 1 to 4096", c.ImageSize)
	case c.Epochs < 0:
		return fmt.Errorf("epochs %d: must be 0 (forever) or more", c.Epochs)
	case c.Workers < 0:
		return fmt.Errorf("workers %d: must be 0 (all cores) or more", c.Workers)
	case c.Keep < 0:
		return fmt.Errorf("keep %d: must be 0 (none) or more", c.Keep)
	case c.Keep > 0 && c.Transform != pipeline.Eval:
		return fmt.Errorf("keep: only a deterministic transform (eval) makes the same bytes every epoch; %s draws new crops", c.Transform)
	case c.Fetch < 0 || c.Fetch > MaxFetch:
		return fmt.Errorf("fetch %d: must be 0 (none ahead) to %d", c.Fetch, MaxFetch)
	case c.Node.Count > 1 && c.Rescan:
		return fmt.Errorf("rescan on node %d of %d: a folder that grows on one node would cut other runs than the other nodes cut", c.Node.Index, c.Node.Count)
	case c.Node.Count > 1 && c.Source.Len() < c.Node.Count:
		return fmt.Errorf("node %d of %d: %d samples, fewer than the nodes", c.Node.Index, c.Node.Count, c.Source.Len())
	}
	if err := c.Node.Validate(); err != nil {
		return err
	}
	if _, err := pipeline.ParseLayout(string(c.Layout)); err != nil {
		return err
	}
	if _, err := pipeline.ParseTransform(string(c.Transform)); err != nil {
		return err
	}
	return nil
}

// BatchBytes is the size of a full batch file.
func (c *Config) BatchBytes() int64 {
	return int64(batchfile.NewLayout(c.BatchSize, c.ImageSize).Size)
}

// pipeline is how the workers make samples.
func (c *Config) pipeline() pipeline.Config {
	return pipeline.Config{ImageSize: c.ImageSize, Layout: c.Layout, Transform: c.Transform, Seed: c.Seed}
}

// MaxFetch bounds Config.Fetch.
const MaxFetch = 1024

// Producer fills a store from a source.
type Producer struct {
	cfg      Config
	fetch    *fetcher // while Run runs with Config.Fetch; nil otherwise
	kept     *kept    // with Config.Keep; nil otherwise
	useTurbo bool
	decoder  string // what status says of the decoder in use
	store    *batchstore.Store
	alloc    *memfile.Allocator
	stats    *Stats
}

// New returns a producer; Run starts it.
func New(cfg Config, store *batchstore.Store, alloc *memfile.Allocator) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Workers == 0 {
		cfg.Workers = runtime.NumCPU()
	}
	if cfg.BatchBytes() > store.Limit() {
		return nil, fmt.Errorf("buffer of %d bytes is smaller than one batch (%d bytes for %d images of %dx%d): raise --buffer or lower --batch-size",
			store.Limit(), cfg.BatchBytes(), cfg.BatchSize, cfg.ImageSize, cfg.ImageSize)
	}
	useTurbo, describe, err := pipeline.PickDecoder(cfg.Decoder)
	if err != nil {
		return nil, err
	}
	p := &Producer{cfg: cfg, store: store, alloc: alloc, stats: newStats(), useTurbo: useTurbo, decoder: describe}
	// What the source left out at open counts as skipped, over the
	// dataset it should have been: a run fails at once on shards that
	// lost more than the budget before a sample is made.
	leftOut := 0
	if sk, ok := source.As[source.Skipper](cfg.Source); ok {
		leftOut = sk.LeftOut()
	}
	p.stats.rescan = cfg.Rescan
	_, p.stats.vanish = source.As[source.Vanisher](cfg.Source)
	p.stats.budget = func(skipped int) error { return cfg.MaxSkipped.Check(leftOut+skipped, leftOut+cfg.Source.Len()) }
	if cfg.Node.Count > 1 {
		p.stats.budget = func(skipped int) error {
			if skipped > 0 {
				return ErrNodeSkip
			}
			return nil
		}
	}
	if err := p.stats.budget(0); err != nil {
		return nil, fmt.Errorf("%s: left out when it was opened: %w", cfg.Source.Describe(), err)
	}
	if cfg.Keep > 0 {
		p.kept = newKept(cfg.Keep)
	}
	return p, nil
}

// Stats is the producer's live counters.
func (p *Producer) Stats() *Stats { return p.stats }

// Config is the configuration in force (workers filled in).
func (p *Producer) Config() Config { return p.cfg }

// task is one sample to make; seq orders tasks across epochs.
type task struct {
	seq      uint64
	epoch    int
	index    int    // dataset index
	version  string // the sample's version when it was read (source.Versioned)
	last     bool   // the epoch's last sample
	epochLen int    // samples in this epoch's order
	pos      int    // position in this epoch's order
	passed   bool   // no consumer wants it: not made, it only ends the epoch
	buf      []byte
	err      error
}

// Run produces every epoch, then tells the store it is finished. It
// returns when done, when ctx ends, or on a failure that stops the
// pipeline (no decodable sample at all). Only the first is the end of the
// data: readers waiting for more get ENOENT then, and an error otherwise
// (a shutdown, a failure), so that no reader takes those for the end.
func (p *Producer) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sampleBytes := 3 * p.cfg.ImageSize * p.cfg.ImageSize
	pool := make(chan []byte, 4*p.cfg.Workers+2)
	for range cap(pool) {
		pool <- make([]byte, sampleBytes)
	}
	if sh, ok := source.As[source.Sharded](p.cfg.Source); ok {
		// No epoch more: its reads of whole shards end, waited for, after
		// the fetcher's (deferred below, so run before) stopped reading.
		defer sh.Schedule(nil, nil)
	}
	if p.cfg.Fetch > 0 {
		p.fetch = newFetcher(ctx, p.cfg.Source, p.cfg.Fetch, p.kept.has)
		defer func() { p.fetch.close(); p.fetch = nil }()
	}
	tasks := make(chan *task)
	results := make(chan *task, cap(pool))
	var wg sync.WaitGroup
	var dispatchErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(tasks)
		dispatchErr = p.dispatch(ctx, pool, tasks)
	}()
	for range p.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.work(ctx, tasks, results)
		}()
	}
	go func() { wg.Wait(); close(results) }()
	err := p.assemble(ctx, pool, results)
	cancel()
	for range results { // let the workers finish
	}
	if err == nil {
		err = dispatchErr
	}
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, batchstore.ErrInterrupted) || errors.Is(err, batchstore.ErrClosed):
		p.store.Shutdown()
		return nil
	case err != nil:
		p.stats.fail(err)
		p.store.Fail(err)
		return err
	}
	p.store.Finish()
	return nil
}

// dispatch emits samples in order, each with a free buffer, for as long
// as some consumer needs them: it idles in the store when none does.
func (p *Producer) dispatch(ctx context.Context, pool chan []byte, tasks chan<- *task) error {
	var seq uint64
	var order []int
	// A store that ran out of samples says so in its own words; this
	// names the source and the count.
	noSamples := func(epoch int, err error) error {
		return fmt.Errorf("epoch %d: no decodable image in %s (%d skipped): %w", epoch, p.cfg.Source.Describe(), p.stats.Skipped(), err)
	}
	for epoch := 0; ; epoch++ {
		if err := p.store.WaitNeed(ctx, epoch, 0); errors.Is(err, batchstore.ErrNoSamples) {
			return noSamples(epoch, err)
		} else if err != nil {
			return err
		}
		if p.cfg.Rescan && epoch > 0 {
			p.rescan(ctx, epoch)
		}
		order = p.fixOrder(epoch, order)
		if len(order) == 0 {
			return noSamples(epoch, batchstore.ErrNoSamples)
		}
		p.stats.beginEpoch(epoch, len(order))
		asked := 0 // order positions asked of the fetcher
		// Whether a position is made is decided once, when it is asked
		// ahead or else dispatched: a sample fetched is made.
		decided := map[int]bool{} // positions asked ahead: whether they are made
		wants := func(pos int) bool {
			w, ok := decided[pos]
			if ok {
				delete(decided, pos)
				return w
			}
			return p.store.Wants(epoch, pos, order[pos])
		}
		for pos, index := range order {
			if err := p.store.WaitNeed(ctx, epoch, pos); err != nil {
				return err
			}
			for ; p.fetch != nil && asked < min(len(order), pos+p.fetch.window()); asked++ {
				w := p.store.Wants(epoch, asked, order[asked])
				if decided[asked] = w; !w {
					continue
				}
				if err := p.fetch.ahead(ctx, order[asked]); err != nil {
					return err
				}
			}
			last := pos == len(order)-1
			t := &task{seq: seq, epoch: epoch, index: index, pos: pos, epochLen: len(order), last: last}
			if !wants(pos) {
				// No decided consumer reading this epoch wants it. Only
				// an epoch's last position goes on, to end the epoch.
				p.stats.passedOver()
				if !last {
					continue
				}
				t.passed = true
			} else {
				select {
				case t.buf = <-pool:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			seq++
			select {
			case tasks <- t:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		// Wait for the epoch's verdicts before ordering the next one, so
		// that samples found bad are left out of it (and of all later ones)
		// the same way whatever the timing.
		if err := p.stats.waitEpoch(ctx); err != nil {
			return err
		}
		if err := p.settleMissing(ctx); err != nil {
			return err
		}
	}
}

// settleMissing rules on the samples whose keys were missing this epoch,
// once it is made, from a listing of the dataset: while it is still
// there each is its sample's loss (skipped, counted); a dataset gone
// (the bucket deleted) or going (more of its keys gone than
// --max-skipped allows, or than half where it allows any number: every
// key deleted, then the bucket, as `aws s3 rb --force` does) fails the
// run with the store's state, and none of them is counted against the
// data.
func (p *Producer) settleMissing(ctx context.Context) error {
	if !p.stats.anyMissing() {
		return nil
	}
	if v, ok := source.As[source.Vanisher](p.cfg.Source); ok {
		left, of, err := v.Left(ctx)
		if err != nil {
			return err
		}
		if vanishing(left, of, p.cfg.Source.Len(), p.cfg.MaxSkipped) {
			return fmt.Errorf("%s: %w: the dataset is vanishing: %d of its %d keys are left", p.cfg.Source.Describe(), remote.ErrUnavailable, left, of)
		}
	}
	return p.stats.settleMissing()
}

// vanishing says whether a dataset of samples, of whose keys left of of
// are listed, has lost more than budget allows to skip (half of it
// where budget allows any number).
func vanishing(left, of, samples int, budget skipbudget.Budget) bool {
	if of <= 0 || left <= 0 {
		return true
	}
	allowed := budget.Allowed(samples)
	if allowed < 0 {
		allowed = samples / 2
	}
	return int64(samples)*int64(of-left)/int64(of) > int64(allowed)
}

// rescan lists the source again before epoch is ordered, so that the
// epoch holds what was added. A failed listing keeps the samples known.
func (p *Producer) rescan(ctx context.Context, epoch int) {
	r, ok := source.As[source.Rescanner](p.cfg.Source)
	if !ok {
		return
	}
	added, err := r.Rescan(ctx)
	if err != nil {
		slog.Warn("rescan failed: the samples known stay", "err", err)
		return
	}
	removed := r.Removed()
	p.stats.setRemoved(removed) // one that came back is made again
	if len(removed) > 0 {
		slog.Info("rescan: files gone from the folder leave the dataset", "removed", len(removed), "epoch", epoch)
	}
	if v, ok := source.As[source.Versioned](p.cfg.Source); ok {
		if retried := p.stats.retryChanged(v); len(retried) > 0 {
			if c, ok := p.cfg.Source.(source.Cached); ok {
				c.Forget(retried...) // the bytes it kept are the old ones
			}
			slog.Info("rescan: samples skipped before whose files changed are tried again", "samples", len(retried), "epoch", epoch)
		}
	}
	if added > 0 {
		p.store.GrowSamples(p.cfg.Source.Len())
		p.stats.added(added, epoch)
		slog.Info("rescan", "added", added, "samples", p.cfg.Source.Len(), "epoch", epoch)
	}
}

// work makes samples until tasks closes.
func (p *Producer) work(ctx context.Context, tasks <-chan *task, results chan<- *task) {
	w := p.newWorker()
	defer w.close()
	for t := range tasks {
		if !t.passed { // one passed over only ends its epoch
			t.err = w.make(ctx, t)
			if over := p.stats.verdict(t.index, t.version, p.cfg.Source.Name, t.err); over != nil {
				t.err = over // the pipeline stops on it
			}
		}
		select {
		case results <- t:
		case <-ctx.Done():
			return
		}
	}
}

// GoProcs is the GOMAXPROCS for a process whose producer runs workers:
// one P per core for its Go code and one more per worker. A worker spends
// its time in C (decode and resize calls of about a millisecond), and a P
// whose goroutine is in C counts as busy: with no P idle, the runtime's
// monitor takes it away and hands it to another thread, and the worker,
// back from C, finds no P, parks its thread and waits to be run again. A
// mount with 2 workers and 4 readers on 2 cores switched threads 54,000
// times in a run of 6,000 images and spent 7.0 s of CPU; with a P spare
// per worker, 43,000 and 6.2 s (perf sched), and the readers got 14% more
// images a second. Only Go code needs a P, so the cores are not
// oversubscribed: the workers' C runs as it did.
func GoProcs(workers int) int { return runtime.NumCPU() + workers }

// Decoder says which decoder is in use, and why.
func (p *Producer) Decoder() string { return p.decoder }
