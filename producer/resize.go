package producer

import (
	"fmt"
	"math"
)

// Layout is the order of a batch's image axes.
type Layout string

// The layouts.
const (
	NCHW Layout = "nchw" // [B,3,S,S]: what PyTorch models take
	NHWC Layout = "nhwc" // [B,S,S,3]: what TensorFlow and JAX prefer
)

// ParseLayout checks a --layout value.
func ParseLayout(s string) (Layout, error) {
	switch Layout(s) {
	case NCHW, NHWC:
		return Layout(s), nil
	}
	return "", fmt.Errorf("layout %q: want nchw or nhwc", s)
}

// taps are one output pixel's source range and weights.
type taps struct {
	first int
	w     []float32
}

// resampler cuts a crop out of an image and resizes it to S×S with a
// triangle filter widened when downscaling (antialiased bilinear, as PIL
// does it), mirrors it if asked, and writes it in the wanted layout. It
// keeps its buffers between samples.
type resampler struct {
	size   int
	layout Layout
	cols   []taps
	rows   []taps
	tmp    []float32 // crop rows × S × 3, after the horizontal pass
	wbuf   []float32
}

func newResampler(size int, layout Layout) *resampler {
	return &resampler{size: size, layout: layout}
}

// weights computes the taps of n outputs over the source range [lo, lo+span).
func (r *resampler) weights(dst []taps, lo, span, n int) []taps {
	scale := float64(span) / float64(n)
	support := math.Max(scale, 1)
	dst = dst[:0]
	for i := 0; i < n; i++ {
		center := float64(lo) + (float64(i)+0.5)*scale
		first := max(lo, int(math.Floor(center-support)))
		last := min(lo+span-1, int(math.Ceil(center+support)))
		start := len(r.wbuf)
		var sum float32
		for j := first; j <= last; j++ {
			x := (float64(j) + 0.5 - center) / support
			wt := float32(math.Max(0, 1-math.Abs(x)))
			r.wbuf = append(r.wbuf, wt)
			sum += wt
		}
		w := r.wbuf[start:]
		if sum == 0 { // cannot happen with support ≥ 1; keep the pixel defined anyway
			w[0], sum = 1, 1
		}
		for k := range w {
			w[k] /= sum
		}
		dst = append(dst, taps{first: first, w: w})
	}
	return dst
}

// resize writes src's crop c as an S×S sample into dst (3·S·S bytes).
func (r *resampler) resize(src *RGB, c Crop, dst []byte) {
	S := r.size
	r.wbuf = r.wbuf[:0]
	r.cols = r.weights(r.cols, c.X, c.W, S)
	r.rows = r.weights(r.rows, c.Y, c.H, S)
	need := c.H * S * 3
	if cap(r.tmp) < need {
		r.tmp = make([]float32, need)
	}
	tmp := r.tmp[:need]
	stride := 3 * src.W
	for y := 0; y < c.H; y++ {
		row := src.Pix[(c.Y+y)*stride:]
		out := tmp[y*S*3:]
		for x, t := range r.cols {
			var sr, sg, sb float32
			p := 3 * t.first
			for _, w := range t.w {
				sr += w * float32(row[p])
				sg += w * float32(row[p+1])
				sb += w * float32(row[p+2])
				p += 3
			}
			out[3*x], out[3*x+1], out[3*x+2] = sr, sg, sb
		}
	}
	plane := S * S
	for y, t := range r.rows {
		for x := 0; x < S; x++ {
			var sr, sg, sb float32
			p := ((t.first-c.Y)*S + x) * 3
			for _, w := range t.w {
				sr += w * tmp[p]
				sg += w * tmp[p+1]
				sb += w * tmp[p+2]
				p += S * 3
			}
			ox := x
			if c.Flip {
				ox = S - 1 - x
			}
			if r.layout == NHWC {
				o := (y*S + ox) * 3
				dst[o], dst[o+1], dst[o+2] = round8(sr), round8(sg), round8(sb)
			} else {
				o := y*S + ox
				dst[o], dst[plane+o], dst[2*plane+o] = round8(sr), round8(sg), round8(sb)
			}
		}
	}
}

func round8(v float32) byte {
	if v <= 0 {
		return 0
	}
	if v >= 255 {
		return 255
	}
	return byte(v + 0.5)
}
