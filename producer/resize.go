package producer

// #cgo CFLAGS: -O3
// #include "resample.h"
import "C"

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

// precision is the fixed-point scale of filter weights, shared with the C
// passes (PIL uses 22 bits for float input; 14 keep 8-bit samples times
// weights inside int32).
const precision = C.TSOCK_PRECISION

// axis is a separable filter along one axis: output i reads k source
// pixels from first[i] on, with weights w[i*k:(i+1)*k] that sum to
// 1<<precision. Every output has the same k (zero-padded), so the inner
// loops have no per-pixel bounds to look up.
type axis struct {
	first []int32
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
		a.first = append(a.first, int32(first))
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
// asked, and writes it in the wanted layout, in integer arithmetic: first
// vertically over the crop's columns (contiguous bytes, which the C
// compiler vectorises), then horizontally over only S rows. It keeps its
// buffers between samples: no garbage per image.
type resampler struct {
	size   int
	layout Layout
	cols   axis // relative to the crop's first column
	rows   axis // absolute source rows
	fw     []float64
	tmp    []uint8 // S rows × crop width × 3, after the vertical pass
	acc    []int32 // one row of the vertical pass
}

func newResampler(size int, layout Layout) *resampler {
	return &resampler{size: size, layout: layout}
}

// resize writes src's crop c as an S×S sample into dst (3·S·S bytes).
// The C passes trust their bounds, so they are checked here.
func (r *resampler) resize(src *RGB, c Crop, dst []byte) error {
	S := r.size
	if len(dst) < 3*S*S || c.X < 0 || c.Y < 0 || c.W < 1 || c.H < 1 || c.X+c.W > src.W || c.Y+c.H > src.H ||
		len(src.Pix) < 3*src.W*src.H {
		return fmt.Errorf("resize: crop %+v of a %dx%d image into %d bytes", c, src.W, src.H, len(dst))
	}
	r.fw = r.cols.build(0, c.W, S, r.fw)
	r.fw = r.rows.build(c.Y, c.H, S, r.fw)
	n := 3 * c.W
	r.tmp = grow(r.tmp, S*n)
	r.acc = grow(r.acc, n)
	C.tsock_vertical((*C.uint8_t)(&src.Pix[0]), C.long(3*src.W), C.long(3*c.X), C.int(n), C.int(S),
		(*C.int32_t)(&r.rows.first[0]), (*C.int32_t)(&r.rows.w[0]), C.int(r.rows.k),
		(*C.int32_t)(&r.acc[0]), (*C.uint8_t)(&r.tmp[0]))
	C.tsock_horizontal((*C.uint8_t)(&r.tmp[0]), C.long(n), C.int(S),
		(*C.int32_t)(&r.cols.first[0]), (*C.int32_t)(&r.cols.w[0]), C.int(r.cols.k),
		cBool(c.Flip), cBool(r.layout == NCHW), (*C.uint8_t)(&dst[0]))
	return nil
}

// grow returns b with length n, reallocated only when it is too small.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
