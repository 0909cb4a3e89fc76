package batchfile

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/tsock/tsock/batchstore"
)

// CUDAFormat names the .cuda control file format.
const CUDAFormat = "tsock-cuda-2"

// CUDAFile says where the tensors of a file cut from parts lie on the
// GPU: each part's data section (the file from its DataStart) is one
// slab. Ragged offsets, which a cut makes anew, are given as values.
type CUDAFile struct {
	Format   string            `json:"format"`
	Device   string            `json:"device"`
	Consumer string            `json:"consumer"`
	Epoch    int               `json:"epoch"`
	Batch    int               `json:"batch"`
	Samples  int               `json:"samples"`
	Meta     map[string]string `json:"metadata"`
	Tensors  []CUDATensor      `json:"tensors"`
}

// CUDATensor is one tensor: in slab segments, or given by value.
type CUDATensor struct {
	Name     string        `json:"name"`
	Dtype    string        `json:"dtype"`
	Shape    []int64       `json:"shape"`
	Segments []CUDASegment `json:"segments,omitempty"`
	Values   []int64       `json:"values,omitempty"`
}

// CUDASegment is a run of bytes of one slab.
type CUDASegment struct {
	Slab   int   `json:"slab"`
	Offset int64 `json:"offset"`
	Bytes  int64 `json:"bytes"`
}

// RenderCUDA renders f's tensors for parts, slabOf giving each part's
// slab. The file's fields other than Tensors and Samples come from f.
func RenderCUDA(f CUDAFile, parts []Part, slabOf func(part int) (int, error)) ([]byte, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("render .cuda: no parts")
	}
	f.Format = CUDAFormat
	f.Samples = 0
	slabs := make([]int, len(parts))
	for i, p := range parts {
		f.Samples += p.To - p.From
		s, err := slabOf(i)
		if err != nil {
			return nil, err
		}
		slabs[i] = s
	}
	layout, err := cutLayout(parts)
	if err != nil {
		return nil, fmt.Errorf("render .cuda: %w", err)
	}
	for _, t := range layout {
		ct := CUDATensor{Name: t.Name, Dtype: t.Dtype, Shape: t.Shape, Values: t.values}
		for _, r := range t.runs {
			ct.Segments = append(ct.Segments, CUDASegment{Slab: slabs[r.part], Offset: r.off, Bytes: r.n})
		}
		f.Tensors = append(f.Tensors, ct)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// CUDAFiles renders consumers/NAME/NNNNNN.cuda for batches published as
// Blobs on one GPU.
type CUDAFiles struct {
	Device  string // the GPU's UUID
	MaxSlab int    // the largest slab id
}

// Size is the length of consumer's file for ref: its JSON with the
// largest slab id everywhere, so that it is known before the batch is
// leased. Render pads to it with spaces, which JSON ignores.
func (c CUDAFiles) Size(ref batchstore.Ref, consumer string) (int64, error) {
	b, err := c.render(ref, nil, consumer, func(*Blob) (int, error) { return c.MaxSlab, nil })
	return int64(len(b)), err
}

// Render is consumer's file for ref, from the leased batches in blobs.
func (c CUDAFiles) Render(ref batchstore.Ref, blobs map[uint64]batchstore.Blob, consumer string) ([]byte, error) {
	size, err := c.Size(ref, consumer)
	if err != nil {
		return nil, err
	}
	b, err := c.render(ref, blobs, consumer, func(b *Blob) (int, error) {
		if b.slab == nil {
			return 0, fmt.Errorf("batch is not on the GPU")
		}
		return b.slab.ID, nil
	})
	if err != nil {
		return nil, err
	}
	return append(b, bytes.Repeat([]byte{' '}, int(size)-len(b))...), nil
}

func (c CUDAFiles) render(ref batchstore.Ref, blobs map[uint64]batchstore.Blob, consumer string, slabOf func(*Blob) (int, error)) ([]byte, error) {
	ps, err := parts(ref, blobs)
	if err != nil {
		return nil, fmt.Errorf("%s/%d.cuda: %w", consumer, ref.Local, err)
	}
	f := CUDAFile{Device: c.Device, Consumer: consumer, Epoch: ref.Epoch, Batch: ref.Index,
		Meta: consumerMeta(ref, ps[0].Header, consumer)}
	return RenderCUDA(f, ps, func(i int) (int, error) {
		blob, _ := ps[i].Data.(*Blob)
		if blob == nil {
			return 0, fmt.Errorf("%s/%d.cuda: part %d is not a published batch", consumer, ref.Local, i)
		}
		return slabOf(blob)
	})
}
