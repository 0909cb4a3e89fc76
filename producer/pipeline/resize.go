package pipeline

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

// build computes n outputs over the source box [lo, lo+span), reading
// only pixels in [bmin, bmax), with a triangle filter widened by the
// scale when downscaling (antialiased bilinear, as PIL does it). first is
// in the source's coordinates.
func (a *axis) build(lo, span float64, n, bmin, bmax int, fw []float64) []float64 {
	scale := span / float64(n)
	support := math.Max(scale, 1)
	// k: the most taps any output has with a non-zero weight.
	a.k = 1
	for i := 0; i < n; i++ {
		first, last := reach(lo, scale, support, i, bmin, bmax)
		a.k = max(a.k, last-first+1)
	}
	a.k = min(a.k, bmax-bmin)
	a.first = a.first[:0]
	a.w = a.w[:0]
	for i := 0; i < n; i++ {
		center := lo + (float64(i)+0.5)*scale
		first, _ := reach(lo, scale, support, i, bmin, bmax)
		first = min(first, bmax-a.k)
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

// reach is the first and last pixel, within [bmin, bmax), where output
// i's filter is not zero.
func reach(lo, scale, support float64, i, bmin, bmax int) (first, last int) {
	center := lo + (float64(i)+0.5)*scale
	// Pixel j's centre j+0.5 must be strictly within support of center.
	first = int(math.Floor(center-support-0.5)) + 1
	last = int(math.Ceil(center+support-0.5)) - 1
	return max(first, bmin), min(last, bmax-1)
}

// span is the source range [lo, hi) the axis reads.
func (a *axis) span() (lo, hi int) {
	return int(a.first[0]), int(a.first[len(a.first)-1]) + a.k
}

// shift moves the axis by d pixels: for a source that starts d pixels in.
func (a *axis) shift(d int) {
	for i := range a.first {
		a.first[i] -= int32(d)
	}
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
	tile   []uint8 // 16 output columns of the horizontal pass
	rows16 []uint8 // 16 rows of the vertical pass
}

func newResampler(size int, layout Layout) *resampler {
	return &resampler{size: size, layout: layout}
}

// resize writes src's crop c as an S×S sample into dst (3·S·S bytes).
func (r *resampler) resize(src *RGB, c Crop, dst []byte) error {
	if c.X < 0 || c.Y < 0 || c.W < 1 || c.H < 1 || c.X+c.W > src.W || c.Y+c.H > src.H {
		return fmt.Errorf("resize: crop %+v of a %dx%d image", c, src.W, src.H)
	}
	if _, _, _, _, err := r.sourceRect(c); err != nil {
		return err
	}
	return r.apply(src, 0, 0, c.Flip, dst)
}

// plan builds the filters of crop c and returns the source rectangle
// [x0, x1) × [y0, y1) that they read: all of the source apply needs.
func (r *resampler) sourceRect(c Crop) (x0, y0, x1, y1 int, err error) {
	b := c.box()
	const slack = 1e-6 // float rounding of a box computed from the same bounds
	if c.W < 1 || c.H < 1 || !(b.W > 0 && b.H > 0) || b.X < float64(c.X)-slack || b.Y < float64(c.Y)-slack ||
		b.X+b.W > float64(c.X+c.W)+slack || b.Y+b.H > float64(c.Y+c.H)+slack {
		return 0, 0, 0, 0, fmt.Errorf("resize: box %+v outside the crop %+v", b, c)
	}
	r.fw = r.cols.build(b.X, b.W, r.size, c.X, c.X+c.W, r.fw)
	r.fw = r.rows.build(b.Y, b.H, r.size, c.Y, c.Y+c.H, r.fw)
	x0, x1 = r.cols.span()
	y0, y1 = r.rows.span()
	return x0, y0, x1, y1, nil
}

// apply runs the planned filters over src, whose pixel (0, 0) is the
// source's (ox, oy), into dst: mirrored if flip. The C passes trust their
// bounds, so they are checked here.
func (r *resampler) apply(src *RGB, ox, oy int, flip bool, dst []byte) error {
	S := r.size
	x0, x1 := r.cols.span()
	y0, y1 := r.rows.span()
	if len(dst) < 3*S*S || x0 < ox || y0 < oy || x1-ox > src.W || y1-oy > src.H || len(src.Pix) < 3*src.W*src.H {
		return fmt.Errorf("resize: source [%d,%d)x[%d,%d) outside the %dx%d image at (%d,%d), or %d bytes for the sample",
			x0, x1, y0, y1, src.W, src.H, ox, oy, len(dst))
	}
	r.rows.shift(oy)
	r.cols.shift(x0) // the vertical pass keeps columns [x0, x1) only
	W := x1 - x0
	r.tmp = grow(r.tmp, 3*W*S)
	r.acc = grow(r.acc, max(3*W, S))
	r.tile = grow(r.tile, 16*S)
	r.rows16 = grow(r.rows16, 16*3*W)
	C.tsock_vertical_t((*C.uint8_t)(&src.Pix[0]), C.long(3*src.W), C.long(3*(x0-ox)), C.int(W), C.int(S),
		(*C.int32_t)(&r.rows.first[0]), (*C.int32_t)(&r.rows.w[0]), C.int(r.rows.k),
		(*C.int32_t)(&r.acc[0]), (*C.uint8_t)(&r.rows16[0]), (*C.uint8_t)(&r.tmp[0]))
	C.tsock_horizontal_t((*C.uint8_t)(&r.tmp[0]), C.int(W), C.int(S),
		(*C.int32_t)(&r.cols.first[0]), (*C.int32_t)(&r.cols.w[0]), C.int(r.cols.k),
		cBool(flip), cBool(r.layout == NCHW), (*C.int32_t)(&r.acc[0]), (*C.uint8_t)(&r.tile[0]), (*C.uint8_t)(&dst[0]))
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
