package ingest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/producer/skipbudget"
)

// Config is what the ingest side must know.
type Config struct {
	// Samples in the dataset, for ordered mode; 0: unordered. Grow
	// raises it while running, up to MaxSamples.
	Samples    int
	MaxSamples int
	// Shuffle each ordered epoch (with Seed); else dataset order.
	Shuffle bool
	Seed    uint64
	// GPU, if set, gets a copy of every batch's data before it is
	// published (--device).
	GPU *gpu.Pool
	// MaxSkipped bounds the samples skipped through ingest/skip
	// (--max-skipped): past it the run fails. The zero value bounds
	// nothing.
	MaxSkipped skipbudget.Budget
}

// Ingest publishes batches written by outside producers.
type Ingest struct {
	cfg   Config
	store *batchstore.Store
	alloc *memfile.Allocator

	mu      sync.Mutex
	next    uint64  // the next batch's sequence number
	writer  *Writer // the batch being written, if any
	schema  *batchfile.Header
	largest int64 // the largest batch published, bytes
	samples int   // the dataset's size now: Config.Samples, or what Grow made it
	ord     orderState
	epochs  epochState
	stats   Stats
}

// Stats is what ingest/status shows.
type Stats struct {
	Published      uint64
	PublishedBytes int64
	Refused        uint64
	LastRefusal    string // "NNNNNN: why"
	Skipped        int
	RecentSkips    []int
	LastWrite      time.Time // the last publish or refusal
	Writing        string    // the batch open for writing, if any: "NNNNNN since T, N written"
	WritingBytes   int64     // its length so far
	Epoch          int       // the producer epoch being written
	Position       int       // samples (ordered: order positions) of it done
	EpochLen       int       // ordered mode: its length
	// Samples is the dataset's size now; Added what Grow added to it,
	// the last time LastAdded before producer epoch LastAddedEpoch.
	Samples, Added, LastAdded, LastAddedEpoch int
}

// New returns the ingest side of store; batches live in alloc's files.
func New(cfg Config, store *batchstore.Store, alloc *memfile.Allocator) *Ingest {
	return &Ingest{cfg: cfg, store: store, alloc: alloc, samples: cfg.Samples, ord: orderState{bad: map[int]bool{}}}
}

// Samples is the dataset's size now (ordered mode).
func (in *Ingest) Samples() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.samples
}

// Grow applies a write to ingest/samples: the dataset now has n samples
// (a dataset that grows, as Modyn's): indices from the old size on join
// the data from the next producer epoch ordered; known ones never move,
// so it never shrinks.
func (in *Ingest) Grow(value string) error {
	n, err := strconv.Atoi(strings.TrimSpace(value))
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case !in.Ordered():
		return fmt.Errorf("%w: samples: an unordered ingest (no --samples) has no dataset size", batchstore.ErrBadBatch)
	case err != nil:
		return fmt.Errorf("%w: samples %q: want a whole number", batchstore.ErrBadBatch, value)
	case n < in.samples:
		return fmt.Errorf("%w: samples %d: the dataset has %d and never shrinks (indices never move)", batchstore.ErrBadBatch, n, in.samples)
	case in.cfg.MaxSamples > 0 && n > in.cfg.MaxSamples:
		return fmt.Errorf("%w: samples %d: at most %d", batchstore.ErrBadBatch, n, in.cfg.MaxSamples)
	case n == in.samples:
		return nil
	}
	added := n - in.samples
	in.samples = n
	in.store.GrowSamples(n)
	in.stats.Added += added
	in.stats.LastAdded, in.stats.LastAddedEpoch = added, in.ord.epoch+1
	return nil
}

// Ordered reports whether tsock owns the order.
func (in *Ingest) Ordered() bool { return in.cfg.Samples > 0 }

// Next is the sequence number the next batch must have.
func (in *Ingest) Next() uint64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.next
}

// Snapshot returns the counters.
func (in *Ingest) Snapshot() Stats {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := in.stats
	s.RecentSkips = append([]int(nil), s.RecentSkips...)
	if w := in.writer; w != nil {
		s.Writing = fmt.Sprintf("%06d since %s, %s written", w.seq, w.since.Format(time.RFC3339), humanize.IBytes(uint64(w.Size())))
		s.WritingBytes = w.Size()
	}
	s.Epoch, s.Position, s.Samples = in.epochs.epoch, in.epochs.pos, in.samples
	if in.Ordered() {
		s.Epoch, s.Position, s.EpochLen = in.ord.epoch, in.ord.pos, len(in.ord.order)
	}
	return s
}

// upload wraps the file as a published blob, copying its data to the
// GPU in GPU mode.
func (in *Ingest) upload(ctx context.Context, f *memfile.File, h *batchfile.Header) (*batchfile.Blob, error) {
	if in.cfg.GPU == nil {
		return batchfile.NewBlob(ctx, f, h, nil, nil)
	}
	data, unmap, err := f.MapRead()
	if err != nil {
		return nil, err
	}
	defer unmap()
	blob, err := batchfile.NewBlob(ctx, f, h, in.cfg.GPU, data[h.DataStart:])
	if ctx.Err() != nil && err != nil {
		// Interrupted while every slab was in use: EINTR, not EFBIG.
		return nil, fmt.Errorf("%w: waiting for a GPU slab: %v", batchstore.ErrInterrupted, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: copy to the GPU: %v", batchstore.ErrTooLarge, err)
	}
	return blob, nil
}

// metadata is what the published header says: the producer's keys,
// with tsock's epoch, batch index, sequence number and sample count.
func (in *Ingest) metadata(h *batchfile.Header, info batchstore.Info, seq uint64) map[string]string {
	meta := make(map[string]string, len(h.Meta)+5)
	for k, v := range h.Meta {
		meta[k] = v
	}
	if v, ok := h.Meta["epoch"]; ok && !in.Ordered() {
		meta["producer_epoch"] = v
	}
	meta["epoch"] = strconv.Itoa(info.Epoch)
	meta["batch"] = strconv.Itoa(info.Index)
	meta["seq"] = strconv.FormatUint(seq, 10)
	meta["samples"] = strconv.Itoa(info.Samples)
	delete(meta, "last")
	return meta
}

// place checks h against the stream (schema, order) and says where it
// goes; commit records it once it is published. Callers hold in.mu.
func (in *Ingest) place(h *batchfile.Header, indices []int64) (batchstore.Info, func(), error) {
	if err := sameSchema(in.schema, h); err != nil {
		return batchstore.Info{}, nil, err
	}
	if in.Ordered() {
		return in.placeOrdered(h, indices)
	}
	return in.placeUnordered(h)
}

// sameSchema: h has the tensors of the first published batch.
func sameSchema(first, h *batchfile.Header) error {
	if first == nil {
		return nil
	}
	if len(first.Tensors) != len(h.Tensors) {
		return fmt.Errorf("%d tensors, but the first batch had %d (every batch must have the same tensors)", len(h.Tensors), len(first.Tensors))
	}
	for _, want := range first.Tensors {
		got := h.Tensor(want.Name)
		if got == nil {
			return fmt.Errorf("no tensor %q, which the first batch had", want.Name)
		}
		_, wantRagged := first.Ragged[want.Name]
		_, gotRagged := h.Ragged[want.Name]
		if got.Dtype != want.Dtype || len(got.Shape) != len(want.Shape) || wantRagged != gotRagged {
			return fmt.Errorf("tensor %q is %s %v (ragged %v), but was %s %v (ragged %v) in the first batch",
				want.Name, got.Dtype, got.Shape, gotRagged, want.Dtype, want.Shape, wantRagged)
		}
		for i := 1; i < len(got.Shape); i++ {
			if got.Shape[i] != want.Shape[i] {
				return fmt.Errorf("tensor %q has shape %v, but %v in the first batch (only the first dimension may change)", want.Name, got.Shape, want.Shape)
			}
		}
	}
	return nil
}

// shuffler is the ordered epochs' shuffle, seeded like the built-in
// pipeline's (seed, epoch, piece).
func (in *Ingest) shuffler(e int) func(int, []int) {
	if !in.cfg.Shuffle {
		return nil
	}
	return func(k int, seg []int) {
		rng := rand.New(rand.NewPCG(in.cfg.Seed, uint64(e)<<24^uint64(k)^0x5368756666))
		rng.Shuffle(len(seg), func(i, j int) { seg[i], seg[j] = seg[j], seg[i] })
	}
}
