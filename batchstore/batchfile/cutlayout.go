package batchfile

import "fmt"

// cutTensor is one tensor of a file cut from parts: either runs of the
// parts' data, or offsets made anew (a ragged tensor's companion).
type cutTensor struct {
	Tensor          // Shape[0] is the cut's; Begin/End unset
	runs   []cutRun // in order
	values []int64  // the offsets, when made anew
}

// cutRun is n bytes at off (relative to the data start) of parts[part].
type cutRun struct {
	part   int
	off, n int64
}

// bytes is the tensor's length in the cut.
func (t *cutTensor) bytes() int64 {
	if t.values != nil {
		return 8 * int64(len(t.values))
	}
	var n int64
	for _, r := range t.runs {
		n += r.n
	}
	return n
}

// cutLayout lays out the tensors of a cut of parts, in the first part's
// data order. It reads no data.
func cutLayout(parts []Part) ([]cutTensor, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("cut: no parts")
	}
	first := parts[0].Header
	out := make([]cutTensor, 0, len(first.Tensors))
	for _, proto := range first.Tensors {
		t := cutTensor{Tensor: Tensor{Name: proto.Name, Dtype: proto.Dtype, Shape: append([]int64(nil), proto.Shape...)}}
		if first.isOffsets(proto.Name) {
			base := proto.Name[:len(proto.Name)-len(OffsetsSuffix)]
			t.values = []int64{0}
			for _, p := range parts {
				off := p.Header.Ragged[base]
				if off == nil {
					return nil, fmt.Errorf("cut: %q is not ragged in every part", base)
				}
				last := t.values[len(t.values)-1]
				for i := p.From + 1; i <= p.To; i++ {
					t.values = append(t.values, last+off[i]-off[p.From])
				}
			}
			t.Shape[0] = int64(len(t.values))
		} else {
			t.Shape[0] = 0
			for i, p := range parts {
				src := p.Header.Tensor(proto.Name)
				if err := sameKind(&proto, src); err != nil {
					return nil, fmt.Errorf("cut: %w", err)
				}
				lo, hi := p.Header.rows(src, p.From, p.To)
				rb := src.rowBytes()
				t.Shape[0] += hi - lo
				t.runs = append(t.runs, cutRun{part: i, off: src.Begin + lo*rb, n: (hi - lo) * rb})
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// sameKind: src can be cut into proto's place.
func sameKind(proto, src *Tensor) error {
	if src == nil {
		return fmt.Errorf("tensor %q missing from a part", proto.Name)
	}
	if src.Dtype != proto.Dtype || len(src.Shape) != len(proto.Shape) {
		return fmt.Errorf("tensor %q: %s %v in one part, %s %v in another", proto.Name, proto.Dtype, proto.Shape, src.Dtype, src.Shape)
	}
	for i := 1; i < len(src.Shape); i++ {
		if src.Shape[i] != proto.Shape[i] {
			return fmt.Errorf("tensor %q: shape %v in one part, %v in another", proto.Name, proto.Shape, src.Shape)
		}
	}
	return nil
}
