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

// precision is the fixed-point scale of filter weights (PIL uses 22 bits
// for float input; 14 keep 8-bit samples times weights inside int32).
const precision = 14

// axis is a separable filter along one axis: output i reads k source
// pixels from first[i] on, with weights w[i*k:(i+1)*k] that sum to
// 1<<precision. Every output has the same k (zero-padded), so the inner
// loops have no per-pixel bounds to look up.
type axis struct {
	first []int
	w     []int32
	k     int
}

// build computes n outputs over the source range [lo, lo+span) with a
// triangle filter widened by the scale when downscaling (antialiased
// bilinear, as PIL does it).
func (a *axis) build(lo, span, n int, fw []float64) []float64 {
	scale := float64(span) / float64(n)
	support := math.Max(scale, 1)
	// k: the most taps any output has with a non-zero weight.
	a.k = 1
	for i := 0; i < n; i++ {
		first, last := a.reach(lo, span, i, scale, support)
		a.k = max(a.k, last-first+1)
	}
	a.first = a.first[:0]
	a.w = a.w[:0]
	for i := 0; i < n; i++ {
		center := float64(lo) + (float64(i)+0.5)*scale
		first, _ := a.reach(lo, span, i, scale, support)
		first = min(first, lo+span-a.k)
		fw = fw[:0]
		var sum float64
		for j := first; j < first+a.k; j++ {
			wt := math.Max(0, 1-math.Abs((float64(j)+0.5-center)/support))
			fw = append(fw, wt)
			sum += wt
		}
		if sum == 0 { // cannot happen with support ≥ 1; keep the pixel defined anyway
			fw[0], sum = 1, 1
		}
		// Round to fixed point, then give the rounding error to the largest
		// tap so the weights sum to exactly one.
		var total int32
		big := 0
		for t, wt := range fw {
			q := int32(math.Round(wt / sum * (1 << precision)))
			a.w = append(a.w, q)
			total += q
			if wt > fw[big] {
				big = t
			}
		}
		a.w[len(a.w)-a.k+big] += 1<<precision - total
		a.first = append(a.first, first)
	}
	return fw
}

// reach is the first and last source pixel, within [lo, lo+span), where
// output i's filter is not zero.
func (a *axis) reach(lo, span, i int, scale, support float64) (first, last int) {
	center := float64(lo) + (float64(i)+0.5)*scale
	// Pixel j's centre j+0.5 must be strictly within support of center.
	first = int(math.Floor(center-support-0.5)) + 1
	last = int(math.Ceil(center+support-0.5)) - 1
	return max(first, lo), min(last, lo+span-1)
}

// resampler cuts a crop out of an image, resizes it to S×S, mirrors it if
// asked, and writes it in the wanted layout, in integer arithmetic. It
// keeps its buffers between samples: no garbage per image.
type resampler struct {
	size   int
	layout Layout
	cols   axis
	rows   axis
	fw     []float64
	tmp    []uint8 // crop rows × S × 3, after the horizontal pass
	acc    []int32 // one output row × 3, during the vertical pass
}

func newResampler(size int, layout Layout) *resampler {
	return &resampler{size: size, layout: layout, acc: make([]int32, 3*size)}
}

// resize writes src's crop c as an S×S sample into dst (3·S·S bytes).
func (r *resampler) resize(src *RGB, c Crop, dst []byte) {
	S := r.size
	r.fw = r.cols.build(c.X, c.W, S, r.fw)
	r.fw = r.rows.build(c.Y, c.H, S, r.fw)
	need := c.H * S * 3
	if cap(r.tmp) < need {
		r.tmp = make([]uint8, need)
	}
	tmp := r.tmp[:need]
	r.horizontal(src, c, tmp)
	r.vertical(c, tmp, dst)
}

// horizontal resizes every row of the crop to S pixels into tmp. The
// common tap counts get loops of their own: this is the hottest code of
// the producer.
func (r *resampler) horizontal(src *RGB, c Crop, tmp []uint8) {
	S, k := r.size, r.cols.k
	stride := 3 * src.W
	first, w := r.cols.first[:S], r.cols.w[:S*k]
	for y := 0; y < c.H; y++ {
		row := src.Pix[(c.Y+y)*stride : (c.Y+y+1)*stride]
		out := tmp[y*S*3 : (y+1)*S*3]
		switch k {
		case 2:
			for x := 0; x < S; x++ {
				p := row[3*first[x] : 3*first[x]+6]
				w0, w1 := w[2*x], w[2*x+1]
				out[3*x] = clampFixed(w0*int32(p[0]) + w1*int32(p[3]))
				out[3*x+1] = clampFixed(w0*int32(p[1]) + w1*int32(p[4]))
				out[3*x+2] = clampFixed(w0*int32(p[2]) + w1*int32(p[5]))
			}
		case 3:
			for x := 0; x < S; x++ {
				p := row[3*first[x] : 3*first[x]+9]
				w0, w1, w2 := w[3*x], w[3*x+1], w[3*x+2]
				out[3*x] = clampFixed(w0*int32(p[0]) + w1*int32(p[3]) + w2*int32(p[6]))
				out[3*x+1] = clampFixed(w0*int32(p[1]) + w1*int32(p[4]) + w2*int32(p[7]))
				out[3*x+2] = clampFixed(w0*int32(p[2]) + w1*int32(p[5]) + w2*int32(p[8]))
			}
		default:
			for x := 0; x < S; x++ {
				ws := w[x*k : x*k+k]
				px := row[3*first[x] : 3*(first[x]+k)]
				var sr, sg, sb int32
				for t, wt := range ws {
					sr += wt * int32(px[3*t])
					sg += wt * int32(px[3*t+1])
					sb += wt * int32(px[3*t+2])
				}
				out[3*x], out[3*x+1], out[3*x+2] = clampFixed(sr), clampFixed(sg), clampFixed(sb)
			}
		}
	}
}

// vertical combines tmp's rows into S output rows, mirrored if asked, in
// the wanted layout.
func (r *resampler) vertical(c Crop, tmp []uint8, dst []byte) {
	S, k := r.size, r.rows.k
	plane := S * S
	acc := r.acc[:3*S]
	for y := 0; y < S; y++ {
		base := r.rows.first[y] - c.Y
		ws := r.rows.w[y*k : y*k+k]
		in := tmp[base*S*3 : (base+1)*S*3]
		w0 := ws[0]
		for i := range acc {
			acc[i] = w0 * int32(in[i])
		}
		for t := 1; t < k; t++ {
			in := tmp[(base+t)*S*3 : (base+t+1)*S*3]
			in = in[:len(acc)]
			wt := ws[t]
			for i := range acc {
				acc[i] += wt * int32(in[i])
			}
		}
		r.writeRow(acc, y, c.Flip, dst, plane)
	}
}

// writeRow stores one output row in the wanted layout.
func (r *resampler) writeRow(acc []int32, y int, flip bool, dst []byte, plane int) {
	S := r.size
	if r.layout == NHWC {
		row := dst[y*S*3 : (y+1)*S*3]
		for x := 0; x < S; x++ {
			ox := x
			if flip {
				ox = S - 1 - x
			}
			row[3*ox], row[3*ox+1], row[3*ox+2] = clampFixed(acc[3*x]), clampFixed(acc[3*x+1]), clampFixed(acc[3*x+2])
		}
		return
	}
	rr, gg, bb := dst[y*S:(y+1)*S], dst[plane+y*S:plane+(y+1)*S], dst[2*plane+y*S:2*plane+(y+1)*S]
	for x := 0; x < S; x++ {
		ox := x
		if flip {
			ox = S - 1 - x
		}
		rr[ox], gg[ox], bb[ox] = clampFixed(acc[3*x]), clampFixed(acc[3*x+1]), clampFixed(acc[3*x+2])
	}
}

// clampFixed rounds a fixed-point sum to a byte.
func clampFixed(v int32) uint8 {
	v = (v + 1<<(precision-1)) >> precision
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}
