package batchfile

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/gpu"
)

// Blob is a published batch: its bytes, its parsed header, and in GPU
// mode the slab that holds a copy of its data section.
type Blob struct {
	batchstore.Blob
	Header *Header
	pool   *gpu.Pool
	slab   *gpu.Slab
}

// NewBlob wraps file, whose header is h. With a pool, data (the file's
// data section) is copied into a slab first, waiting for a free one.
func NewBlob(ctx context.Context, file batchstore.Blob, h *Header, pool *gpu.Pool, data []byte) (*Blob, error) {
	b := &Blob{Blob: file, Header: h, pool: pool}
	if pool != nil {
		slab, err := pool.Upload(ctx, data)
		if err != nil {
			return nil, err
		}
		b.slab = slab
	}
	return b, nil
}

// Free returns the slab, if any, then frees the file.
func (b *Blob) Free() error {
	if b.slab != nil {
		b.pool.Release(b.slab)
		b.slab = nil
	}
	return b.Blob.Free()
}

// headerOf is the parsed header of a published batch.
func headerOf(blob batchstore.Blob) (*Header, error) {
	b, ok := blob.(*Blob)
	if !ok {
		return nil, fmt.Errorf("batch of type %T has no parsed header", blob)
	}
	return b.Header, nil
}

// parts turns a consumer's batch into runs of published batches; data
// comes from blobs (the leased ones), or from the pieces' own blobs when
// blobs is nil (only headers will be read).
func parts(ref batchstore.Ref, blobs map[uint64]batchstore.Blob) ([]Part, error) {
	if len(ref.Pieces) == 0 {
		return nil, fmt.Errorf("a batch of no samples (%w)", batchstore.ErrNotFound)
	}
	out := make([]Part, len(ref.Pieces))
	for i, p := range ref.Pieces {
		blob := p.Blob
		if blobs != nil {
			var ok bool
			if blob, ok = blobs[p.Seq]; !ok {
				return nil, fmt.Errorf("producer batch %d not leased", p.Seq)
			}
		}
		h, err := headerOf(blob)
		if err != nil {
			return nil, err
		}
		out[i] = Part{Header: h, Data: blob, From: p.From, To: p.To}
	}
	return out, nil
}

// consumerMeta is the metadata of consumer's file for ref: the first
// producer batch's, with the consumer's own epoch, batch number and
// samples.
func consumerMeta(ref batchstore.Ref, first *Header, consumer string) map[string]string {
	meta := make(map[string]string, len(first.Meta)+5)
	for k, v := range first.Meta {
		meta[k] = v
	}
	meta["epoch"] = strconv.Itoa(ref.Epoch)
	meta["batch"] = strconv.Itoa(ref.Index)
	meta["samples"] = strconv.Itoa(ref.Samples)
	meta["seq"] = strconv.FormatUint(ref.Pieces[0].Seq, 10)
	meta["consumer"] = consumer
	return meta
}

// Compose lays out consumer's re-batched file ref from the leased
// producer batches in blobs. Its size is Measure's.
func Compose(ref batchstore.Ref, blobs map[uint64]batchstore.Blob, consumer string) (*Composite, error) {
	ps, err := parts(ref, blobs)
	if err != nil {
		return nil, fmt.Errorf("compose %s/%d: %w", consumer, ref.Local, err)
	}
	widest, err := Cut(ps, widestMeta(ps[0].Header))
	if err != nil {
		return nil, fmt.Errorf("compose %s/%d: %w", consumer, ref.Local, err)
	}
	return cut(ps, consumerMeta(ref, ps[0].Header, consumer), widest.DataStart())
}

// Measure is the exact size of a re-batched file cut from pieces, from
// their headers alone (batchstore.Config.Measure): every such file's
// header is padded as if its numbers and consumer name were the widest
// possible, so the size does not depend on them.
func Measure(pieces []batchstore.Piece) int64 {
	ps, err := parts(batchstore.Ref{Pieces: pieces}, nil)
	if err != nil {
		return 0
	}
	c, err := Cut(ps, widestMeta(ps[0].Header))
	if err != nil {
		return 0
	}
	return c.Size()
}

// widestMeta is consumerMeta with the widest values it can hold.
func widestMeta(first *Header) map[string]string {
	const number = "18446744073709551615"
	ref := batchstore.Ref{Pieces: []batchstore.Piece{{}}}
	meta := consumerMeta(ref, first, strings.Repeat("x", 64))
	for _, k := range []string{"epoch", "batch", "samples", "seq"} {
		meta[k] = number
	}
	return meta
}
