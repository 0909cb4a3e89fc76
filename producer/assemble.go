package producer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer/skipbudget"
	"github.com/tsock/tsock/producer/source/remote"
)

// building is the batch being filled.
type building struct {
	res              *batchstore.Reservation
	file             *memfile.File
	layout           batchfile.Layout // for the capacity it was allocated with
	epoch            int
	index            int // batch index within the epoch
	firstPos, endPos int // order positions covered
	n                int // samples in it so far
	labels           []int64
	indices          []int64
}

// assembler turns results, taken in order, into published batches.
type assembler struct {
	p   *Producer
	cur *building
	// epoch is the epoch of the last sample added and epochBatches the
	// batches of it published so far: samples come in order, so one
	// count serves (a map by epoch would grow forever with --epochs 0).
	epoch        int
	epochBatches int
	published    uint64 // batches published, all epochs: the next one's seq
}

// assemble consumes results until the channel closes or ctx ends.
func (p *Producer) assemble(ctx context.Context, pool chan<- []byte, results <-chan *task) error {
	a := &assembler{p: p}
	defer a.abandon()
	waiting := map[uint64]*task{}
	var next uint64
	for t := range results {
		waiting[t.seq] = t
		for {
			t, ok := waiting[next]
			if !ok {
				break
			}
			delete(waiting, next)
			next++
			err := a.add(ctx, t)
			if t.buf != nil {
				pool <- t.buf
			}
			if err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// add places one result; it publishes when the batch is full or the
// epoch is over.
func (a *assembler) add(ctx context.Context, t *task) error {
	if remote.StoreFault(t.err) || errors.Is(t.err, skipbudget.ErrExceeded) || errors.Is(t.err, ErrNodeSkip) {
		return fmt.Errorf("sample %s: %w", a.p.cfg.Source.Name(t.index), t.err)
	}
	if t.epoch != a.epoch {
		a.epoch, a.epochBatches = t.epoch, 0
	}
	if t.err == nil && !t.passed {
		if a.cur == nil {
			if err := a.start(ctx, t); err != nil {
				return err
			}
		}
		b := a.cur
		at := b.layout.ImagesAt() + b.n*b.layout.SampleBytes
		copy(b.file.Bytes()[at:at+b.layout.SampleBytes], t.buf)
		b.labels = append(b.labels, int64(a.p.cfg.Source.Label(t.index)))
		b.indices = append(b.indices, int64(t.index))
		b.n++
		b.endPos = t.pos + 1
	}
	switch {
	case a.cur != nil && (a.cur.n == a.cur.layout.Samples || t.last):
		return a.publish(ctx, t.last)
	case t.last: // the epoch's last samples failed after its last batch
		a.p.store.EndEpoch(t.epoch)
	}
	return nil
}

// start reserves room and allocates the batch that t opens. Its capacity
// is what is left of the epoch, up to the batch size.
func (a *assembler) start(ctx context.Context, t *task) error {
	capacity := min(a.p.cfg.BatchSize, t.epochLen-t.pos)
	l := batchfile.NewLayout(capacity, a.p.cfg.ImageSize)
	res, err := a.p.store.Reserve(ctx, int64(l.Size))
	if err != nil {
		return err
	}
	f, err := a.p.alloc.Create(int64(l.Size))
	if err != nil {
		res.Cancel()
		return fmt.Errorf("allocate batch %d of epoch %d: %w", a.epochBatches, t.epoch, err)
	}
	a.cur = &building{res: res, file: f, layout: l, epoch: t.epoch, index: a.epochBatches, firstPos: t.pos}
	return nil
}

// publish finishes the batch's file, copies its data to the GPU if there
// is one, and hands it to the store.
func (a *assembler) publish(ctx context.Context, last bool) error {
	b := a.cur
	a.cur = nil
	if b.n < b.layout.Samples {
		if err := b.shrink(); err != nil {
			b.res.Cancel()
			b.file.Free()
			return err
		}
	}
	data := b.file.Bytes()
	for i := 0; i < b.n; i++ {
		binary.LittleEndian.PutUint64(data[b.layout.LabelsAt()+8*i:], uint64(b.labels[i]))
		binary.LittleEndian.PutUint64(data[b.layout.IndicesAt()+8*i:], uint64(b.indices[i]))
	}
	meta := batchfile.Meta{Epoch: b.epoch, Index: b.index, Seq: a.published,
		ImageSize: a.p.cfg.ImageSize, Layout: string(a.p.cfg.Layout), Transform: string(a.p.cfg.Transform)}
	var blob batchstore.Blob = b.file
	h, hdr, err := b.layout.Header(meta)
	if err == nil {
		copy(data, hdr)
		var fb *batchfile.Blob
		if fb, err = batchfile.NewBlob(ctx, b.file, h, a.p.cfg.GPU, data[batchfile.DataStart:]); err == nil {
			blob = fb
		}
	}
	if err == nil {
		err = b.file.Seal()
	}
	if err == nil {
		info := batchstore.Info{
			Epoch: b.epoch, Index: b.index, Samples: b.n, FirstPos: b.firstPos, EndPos: b.endPos, Last: last,
			Indices: make([]int32, b.n),
		}
		for i := range info.Indices {
			info.Indices[i] = int32(b.indices[i]) // dataset indices: below Source.Len, an int
		}
		_, err = b.res.Publish(blob, info)
	}
	if err != nil {
		b.res.Cancel()
		blob.Free()
		return fmt.Errorf("publish batch %d of epoch %d: %w", b.index, b.epoch, err)
	}
	a.epochBatches++
	a.published++
	return nil
}

// shrink lays a batch that came out short (skipped samples at the end of
// an epoch) out again for its real count: the images move down to their
// new offset and the file is cut.
func (b *building) shrink() error {
	l := batchfile.LayoutFor(b.n, b.layout.SampleBytes)
	data := b.file.Bytes()
	copy(data[l.ImagesAt():], data[b.layout.ImagesAt():b.layout.ImagesAt()+b.n*l.SampleBytes])
	if err := b.file.Truncate(int64(l.Size)); err != nil {
		return fmt.Errorf("shrink batch %d of epoch %d: %w", b.index, b.epoch, err)
	}
	b.layout = l
	return nil
}

// abandon frees a half-built batch when the pipeline stops.
func (a *assembler) abandon() {
	if a.cur != nil {
		a.cur.res.Cancel()
		a.cur.file.Free()
		a.cur = nil
	}
}
