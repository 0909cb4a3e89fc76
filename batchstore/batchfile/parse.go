package batchfile

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Batch is a parsed batch file; its slices alias the bytes parsed.
type Batch struct {
	Epoch, Index int
	Seq          uint64
	Labels       []int64
	Indices      []int64
	Images       []byte // Samples × 3·S·S, in the file's layout
	Shape        []int  // of the images tensor
	Layout       string // nchw or nhwc
	Meta         map[string]string
}

// Samples is the number of samples in the batch.
func (b *Batch) Samples() int { return len(b.Labels) }

// ParseBatch reads a batch file of the built-in pipeline's form: a valid
// batch with labels and indices (I64) and images (U8, 4 dimensions).
func ParseBatch(data []byte) (*Batch, error) {
	h, err := ParseBytes(data)
	if err != nil {
		return nil, err
	}
	b := &Batch{Layout: h.Meta["layout"], Meta: h.Meta}
	if b.Epoch, err = strconv.Atoi(h.Meta["epoch"]); err != nil {
		return nil, fmt.Errorf("metadata epoch: %w", err)
	}
	if b.Index, err = strconv.Atoi(h.Meta["batch"]); err != nil {
		return nil, fmt.Errorf("metadata batch: %w", err)
	}
	b.Seq, _ = strconv.ParseUint(h.Meta["seq"], 10, 64)
	tensor := func(name, dtype string) ([]byte, *Tensor, error) {
		t := h.Tensor(name)
		if t == nil || t.Dtype != dtype {
			return nil, nil, fmt.Errorf("no %s tensor %s", dtype, name)
		}
		return data[h.DataStart+t.Begin : h.DataStart+t.End], t, nil
	}
	labels, _, err := tensor("labels", "I64")
	if err != nil {
		return nil, err
	}
	indices, _, err := tensor("indices", "I64")
	if err != nil {
		return nil, err
	}
	images, it, err := tensor("images", "U8")
	if err != nil {
		return nil, err
	}
	if len(it.Shape) != 4 {
		return nil, fmt.Errorf("images of shape %v: want 4 dimensions", it.Shape)
	}
	b.Images = images
	for _, d := range it.Shape {
		b.Shape = append(b.Shape, int(d))
	}
	b.Labels, b.Indices = int64s(labels), int64s(indices)
	return b, nil
}

func int64s(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}
