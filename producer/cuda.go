package producer

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/gpu"
)

// deviceBlob is a published batch whose data section (labels, indices,
// images: the file from DataStart on) is also in a GPU slab. Freeing the
// batch returns the slab.
type deviceBlob struct {
	*memfile.File
	pool *gpu.Pool
	slab *gpu.Slab
}

func (b *deviceBlob) Free() error {
	b.pool.Release(b.slab)
	return b.File.Free()
}

// CUDAFiles renders consumers/NAME/NNNNNN.cuda: where each tensor of a
// consumer's batch lies on the GPU, as segments of the pool's slabs (one
// per tensor for a producer batch; one per piece for a re-batched one).
type CUDAFiles struct {
	ImageSize int
	Layout    Layout
	Device    string // UUID
	MaxSlab   int    // the largest slab id
}

// NewCUDAFiles returns the renderer for cfg's batches in pool.
func NewCUDAFiles(cfg Config, pool *gpu.Pool) CUDAFiles {
	return CUDAFiles{ImageSize: cfg.ImageSize, Layout: cfg.Layout, Device: pool.Driver().Info().UUID,
		MaxSlab: len(pool.Slabs()) - 1}
}

type cudaFile struct {
	Format   string      `json:"format"`
	Device   string      `json:"device"`
	Consumer string      `json:"consumer"`
	Epoch    int         `json:"epoch"`
	Batch    int         `json:"batch"`
	Samples  int         `json:"samples"`
	Tensors  cudaTensors `json:"tensors"`
}

type cudaTensors struct {
	Labels  cudaTensor `json:"labels"`
	Indices cudaTensor `json:"indices"`
	Images  cudaTensor `json:"images"`
}

type cudaTensor struct {
	Dtype    string        `json:"dtype"`
	Shape    []int         `json:"shape"`
	Segments []cudaSegment `json:"segments"`
}

type cudaSegment struct {
	Slab   int   `json:"slab"`
	Offset int64 `json:"offset"`
	Bytes  int64 `json:"bytes"`
}

// Size is the length of ref's file: its JSON with the largest slab id
// everywhere, so that it is known before the batch is leased. Render pads
// to it with spaces, which JSON ignores.
func (c CUDAFiles) Size(ref batchstore.Ref, consumer string) (int64, error) {
	b, err := c.render(ref, consumer, func(uint64) (int, error) { return c.MaxSlab, nil })
	return int64(len(b)), err
}

// Render is ref's file, from the leased producer batches in blobs.
func (c CUDAFiles) Render(ref batchstore.Ref, blobs map[uint64]batchstore.Blob, consumer string) ([]byte, error) {
	size, err := c.Size(ref, consumer)
	if err != nil {
		return nil, err
	}
	b, err := c.render(ref, consumer, func(seq uint64) (int, error) {
		db, ok := blobs[seq].(*deviceBlob)
		if !ok {
			return 0, fmt.Errorf("producer batch %d is not on the GPU", seq)
		}
		return db.slab.ID, nil
	})
	if err != nil {
		return nil, err
	}
	return append(b, bytes.Repeat([]byte{' '}, int(size)-len(b))...), nil
}

func (c CUDAFiles) render(ref batchstore.Ref, consumer string, slabOf func(seq uint64) (int, error)) ([]byte, error) {
	sample := 3 * c.ImageSize * c.ImageSize
	shape := []int{ref.Samples, 3, c.ImageSize, c.ImageSize}
	if c.Layout == NHWC {
		shape = []int{ref.Samples, c.ImageSize, c.ImageSize, 3}
	}
	f := cudaFile{Format: "tsock-cuda-1", Device: c.Device, Consumer: consumer, Epoch: ref.Epoch, Batch: ref.Index,
		Samples: ref.Samples, Tensors: cudaTensors{
			Labels:  cudaTensor{Dtype: "I64", Shape: []int{ref.Samples}},
			Indices: cudaTensor{Dtype: "I64", Shape: []int{ref.Samples}},
			Images:  cudaTensor{Dtype: "U8", Shape: shape},
		}}
	// In a slab, as in the file after DataStart: labels, indices, images.
	for _, p := range ref.Pieces {
		slab, err := slabOf(p.Seq)
		if err != nil {
			return nil, fmt.Errorf("%s/%d.cuda: %w", consumer, ref.Local, err)
		}
		n := int64(p.To - p.From)
		seg := func(t *cudaTensor, at, width int64) {
			t.Segments = append(t.Segments, cudaSegment{Slab: slab, Offset: at + int64(p.From)*width, Bytes: n * width})
		}
		seg(&f.Tensors.Labels, 0, 8)
		seg(&f.Tensors.Indices, 8*int64(p.Total), 8)
		seg(&f.Tensors.Images, 16*int64(p.Total), int64(sample))
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
