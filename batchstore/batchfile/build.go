package batchfile

import (
	"encoding/binary"
	"fmt"
)

// TensorData is a tensor and its bytes, for Build.
type TensorData struct {
	Name  string
	Dtype string
	Shape []int64
	Data  []byte
}

// Build renders a whole batch file: the header aligned to align, then
// the tensors' bytes in order. It checks the result with Parse.
func Build(meta map[string]string, tensors []TensorData, align int64) ([]byte, error) {
	h := &Header{Meta: meta}
	var at int64
	for _, t := range tensors {
		h.Tensors = append(h.Tensors, Tensor{Name: t.Name, Dtype: t.Dtype, Shape: t.Shape, Begin: at, End: at + int64(len(t.Data))})
		at += int64(len(t.Data))
	}
	out := h.Encode(align)
	for _, t := range tensors {
		out = append(out, t.Data...)
	}
	if _, err := ParseBytes(out); err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	return out, nil
}

// Int64s is the data of an I64 tensor holding v: little-endian, as
// safetensors stores it (offsets, indices).
func Int64s(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}
