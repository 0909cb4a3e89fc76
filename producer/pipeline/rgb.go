package pipeline

import (
	"image"
	"image/color"
)

// RGB is a decoded image: packed 8-bit R, G, B, row-major, stride 3*W.
type RGB struct {
	W, H int
	Pix  []byte
}

// reset sizes img for w×h, reusing its memory when it is large enough.
func (img *RGB) reset(w, h int) {
	n := 3 * w * h
	if cap(img.Pix) < n {
		img.Pix = make([]byte, n)
	}
	img.W, img.H, img.Pix = w, h, img.Pix[:n]
}

// keepBytes is the largest pixel buffer a worker keeps between samples
// (a 4096² photo): a larger one, met once, is given back rather than held
// for the rest of the run by every worker that met one.
var keepBytes = 3 * 4096 * 4096 // a variable for tests

// trim gives back a buffer larger than keepBytes.
func (img *RGB) trim() {
	if cap(img.Pix) > keepBytes {
		img.Pix = nil
	}
}

// fromImage converts any image.Image into img, with fast paths for the
// types the standard decoders return.
func (img *RGB) fromImage(src image.Image) {
	b := src.Bounds()
	img.reset(b.Dx(), b.Dy())
	switch s := src.(type) {
	case *image.YCbCr:
		for y := 0; y < img.H; y++ {
			row := img.Pix[3*img.W*y:]
			for x := 0; x < img.W; x++ {
				yi := s.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := s.COffset(b.Min.X+x, b.Min.Y+y)
				r, g, bl := color.YCbCrToRGB(s.Y[yi], s.Cb[ci], s.Cr[ci])
				row[3*x], row[3*x+1], row[3*x+2] = r, g, bl
			}
		}
	case *image.Gray:
		for y := 0; y < img.H; y++ {
			row := img.Pix[3*img.W*y:]
			src := s.Pix[s.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := 0; x < img.W; x++ {
				v := src[x]
				row[3*x], row[3*x+1], row[3*x+2] = v, v, v
			}
		}
	case *image.RGBA:
		for y := 0; y < img.H; y++ {
			row := img.Pix[3*img.W*y:]
			src := s.Pix[s.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := 0; x < img.W; x++ {
				row[3*x], row[3*x+1], row[3*x+2] = src[4*x], src[4*x+1], src[4*x+2]
			}
		}
	default:
		for y := 0; y < img.H; y++ {
			row := img.Pix[3*img.W*y:]
			for x := 0; x < img.W; x++ {
				c := color.NRGBAModel.Convert(src.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
				row[3*x], row[3*x+1], row[3*x+2] = c.R, c.G, c.B
			}
		}
	}
}
