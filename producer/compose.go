package producer

import (
	"fmt"
	"io"
	"sort"

	"github.com/tsock/tsock/batchstore"
)

// Composite is one consumer's re-batched file: a header of its own, then
// labels, indices and images read at read time from runs of samples of
// the producer's batches. Nothing is copied until a reader asks.
type Composite struct {
	header  []byte
	extents []extent // sorted by at
	size    int64
}

type extent struct {
	at   int64 // offset in the composite
	blob batchstore.Blob
	off  int64 // offset in the blob
	n    int64
}

// Composer builds composites in the producer's format.
type Composer struct {
	ImageSize int
	Layout    Layout
	Transform Transform
}

// NewComposer returns the composer of cfg's format.
func NewComposer(cfg Config) Composer {
	return Composer{ImageSize: cfg.ImageSize, Layout: cfg.Layout, Transform: cfg.Transform}
}

// StoreConfig is the store configuration that matches cfg.
func StoreConfig(cfg Config, limit int64) batchstore.Config {
	return batchstore.Config{
		Limit: limit, BatchSize: cfg.BatchSize, Epochs: cfg.Epochs,
		Samples: cfg.Source.Len(), SizeOf: NewComposer(cfg).SizeOf,
	}
}

// SizeOf is the size of a batch file of n samples.
func (c Composer) SizeOf(n int) int64 { return int64(newBatchLayout(n, c.ImageSize).size) }

// Compose lays out consumer's batch ref from the producer batches in blobs.
func (c Composer) Compose(ref batchstore.Ref, blobs map[uint64]batchstore.Blob, consumer string) (*Composite, error) {
	l := newBatchLayout(ref.Samples, c.ImageSize)
	hdr, err := l.header(batchMeta{epoch: ref.Epoch, index: ref.Index, seq: ref.Pieces[0].Seq,
		imageSize: c.ImageSize, layout: c.Layout, transform: c.Transform, consumer: consumer})
	if err != nil {
		return nil, err
	}
	comp := &Composite{header: hdr, size: int64(l.size)}
	// Three regions, each the concatenation of the pieces' runs.
	regions := []struct {
		at    int
		width int
		src   func(batchLayout) int
	}{
		{l.labelsAt(), 8, batchLayout.labelsAt},
		{l.indicesAt(), 8, batchLayout.indicesAt},
		{l.imagesAt(), l.sampleBytes, batchLayout.imagesAt},
	}
	for _, r := range regions {
		at := int64(r.at)
		for _, p := range ref.Pieces {
			blob, ok := blobs[p.Seq]
			if !ok {
				return nil, fmt.Errorf("compose %s/%d: producer batch %d not leased", consumer, ref.Local, p.Seq)
			}
			src := newBatchLayout(p.Total, c.ImageSize)
			n := int64((p.To - p.From) * r.width)
			comp.extents = append(comp.extents, extent{at: at, blob: blob, off: int64(r.src(src) + p.From*r.width), n: n})
			at += n
		}
	}
	return comp, nil
}

// Size is the composite's length.
func (c *Composite) Size() int64 { return c.size }

// ReadAt implements io.ReaderAt.
func (c *Composite) ReadAt(p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) && off < c.size {
		n, err := c.readSome(p[done:], off)
		if err != nil {
			return done, err
		}
		done += n
		off += int64(n)
	}
	if done < len(p) {
		return done, io.EOF
	}
	return done, nil
}

// readSome reads from the one region that holds off.
func (c *Composite) readSome(p []byte, off int64) (int, error) {
	if off < int64(len(c.header)) {
		return copy(p, c.header[off:]), nil
	}
	i := sort.Search(len(c.extents), func(i int) bool { return c.extents[i].at+c.extents[i].n > off })
	if i == len(c.extents) || c.extents[i].at > off {
		return 0, fmt.Errorf("composite: no data at offset %d", off)
	}
	e := c.extents[i]
	rel := off - e.at
	want := min(int64(len(p)), e.n-rel)
	return e.blob.ReadAt(p[:want], e.off+rel)
}
