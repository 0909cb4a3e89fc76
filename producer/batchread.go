package producer

import (
	"encoding/binary"
	"encoding/json"
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
	Layout       Layout
}

// Samples is the number of samples in the batch.
func (b *Batch) Samples() int { return len(b.Labels) }

type tensorHeader struct {
	Dtype   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// ParseBatch reads a tsock batch file, checking the structure it relies
// on: the header length, the three tensors and their dtypes, and offsets
// inside the file.
func ParseBatch(data []byte) (*Batch, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("batch of %d bytes: too short for a safetensors header", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > uint64(len(data)-8) {
		return nil, fmt.Errorf("header length %d runs past the %d-byte file", n, len(data))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &raw); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	var meta map[string]string
	if err := json.Unmarshal(raw["__metadata__"], &meta); err != nil {
		return nil, fmt.Errorf("header metadata: %w", err)
	}
	b := &Batch{Layout: Layout(meta["layout"])}
	var err error
	if b.Epoch, err = strconv.Atoi(meta["epoch"]); err != nil {
		return nil, fmt.Errorf("metadata epoch: %w", err)
	}
	if b.Index, err = strconv.Atoi(meta["batch"]); err != nil {
		return nil, fmt.Errorf("metadata batch: %w", err)
	}
	b.Seq, _ = strconv.ParseUint(meta["seq"], 10, 64)
	body := data[8+n:]
	tensor := func(name, dtype string) ([]byte, []int, error) {
		var th tensorHeader
		if err := json.Unmarshal(raw[name], &th); err != nil {
			return nil, nil, fmt.Errorf("tensor %s: %w", name, err)
		}
		if th.Dtype != dtype || th.Offsets[0] < 0 || th.Offsets[0] > th.Offsets[1] || th.Offsets[1] > int64(len(body)) {
			return nil, nil, fmt.Errorf("tensor %s: dtype %s offsets %v in %d bytes", name, th.Dtype, th.Offsets, len(body))
		}
		return body[th.Offsets[0]:th.Offsets[1]], th.Shape, nil
	}
	labels, _, err := tensor("labels", "I64")
	if err != nil {
		return nil, err
	}
	indices, _, err := tensor("indices", "I64")
	if err != nil {
		return nil, err
	}
	if b.Images, b.Shape, err = tensor("images", "U8"); err != nil {
		return nil, err
	}
	b.Labels, b.Indices = int64s(labels), int64s(indices)
	if len(b.Labels) != len(b.Indices) || len(b.Shape) != 4 || b.Shape[0] != len(b.Labels) {
		return nil, fmt.Errorf("tensors disagree: %d labels, %d indices, images %v", len(b.Labels), len(b.Indices), b.Shape)
	}
	return b, nil
}

func int64s(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}
