package pipeline

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestRandomResizedCropStaysInside(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		w, h := 1+rng.IntN(900), 1+rng.IntN(900)
		c := cropFor(Train, 7, i%3, i, w, h, 224)
		if c.W < 1 || c.H < 1 || c.X < 0 || c.Y < 0 || c.X+c.W > w || c.Y+c.H > h {
			t.Fatalf("%dx%d: crop %+v outside the image", w, h, c)
		}
		if w >= 8 && h >= 8 && float64(c.W*c.H) < 0.079*float64(w*h) && c.W < w && c.H < h {
			t.Fatalf("%dx%d: crop %+v under 8%% of the area", w, h, c)
		}
	}
}

func TestCropIsDeterministic(t *testing.T) {
	a := cropFor(Train, 3, 1, 42, 500, 375, 224)
	b := cropFor(Train, 3, 1, 42, 500, 375, 224)
	if a != b {
		t.Fatalf("same inputs, different crops: %+v %+v", a, b)
	}
	differs := 0
	for e := 0; e < 20; e++ {
		if cropFor(Train, 3, e, 42, 500, 375, 224) != a {
			differs++
		}
	}
	if differs < 15 {
		t.Fatalf("crops barely change across epochs: %d of 20 differ", differs)
	}
}

// The eval crop is torchvision's Resize(256) + CenterCrop(224) as one
// box of the source, worked out by hand: 400x200 resizes to 512x256 and
// is cut at (144, 16); 375x500 resizes to 256x341 (int() of 341.3) and is
// cut at top round(58.5) = 58, as Python rounds halves to even.
func TestEvalCropIsTorchvisionsGeometry(t *testing.T) {
	for _, c := range []struct {
		w, h int
		want Box
	}{
		{400, 200, Box{X: 144 * 400.0 / 512, Y: 16 * 200.0 / 256, W: 224 * 400.0 / 512, H: 224 * 200.0 / 256}},
		{375, 500, Box{X: 16 * 375.0 / 256, Y: 58 * 500.0 / 341, W: 224 * 375.0 / 256, H: 224 * 500.0 / 341}},
	} {
		got := cropFor(Eval, 0, 0, 0, c.w, c.h, 224)
		if got != (Crop{W: c.w, H: c.h, Box: c.want}) {
			t.Errorf("%dx%d: eval crop %+v, want the whole image read and box %+v", c.w, c.h, got, c.want)
		}
	}
}

// gradient is a w×h image whose pixel (x,y) is (x, y, x+y) mod 256.
func gradient(w, h int) *RGB {
	img := &RGB{}
	img.reset(w, h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := 3 * (y*w + x)
			img.Pix[p], img.Pix[p+1], img.Pix[p+2] = byte(x), byte(y), byte(x+y)
		}
	}
	return img
}

func TestResizeOneToOneIsExact(t *testing.T) {
	const S = 16
	src := gradient(S, S)
	for _, layout := range []Layout{NCHW, NHWC} {
		for _, flip := range []bool{false, true} {
			out := make([]byte, 3*S*S)
			newResampler(S, layout).resize(src, Crop{W: S, H: S, Flip: flip}, out)
			for y := 0; y < S; y++ {
				for x := 0; x < S; x++ {
					sx := x
					if flip {
						sx = S - 1 - x
					}
					for c := 0; c < 3; c++ {
						want := src.Pix[3*(y*S+sx)+c]
						got := out[c*S*S+y*S+x]
						if layout == NHWC {
							got = out[3*(y*S+x)+c]
						}
						if got != want {
							t.Fatalf("%s flip=%v (%d,%d,%d): got %d want %d", layout, flip, x, y, c, got, want)
						}
					}
				}
			}
		}
	}
}

func TestResizeDownAveragesAndUpInterpolates(t *testing.T) {
	src := &RGB{}
	src.reset(4, 2)
	for i := range src.Pix {
		src.Pix[i] = 100
	}
	// A flat image stays flat whatever the scale.
	for _, S := range []int{1, 3, 7} {
		out := make([]byte, 3*S*S)
		newResampler(S, NCHW).resize(src, Crop{W: 4, H: 2}, out)
		if !bytes.Equal(out, bytes.Repeat([]byte{100}, len(out))) {
			t.Fatalf("S=%d: flat image came out %v", S, out)
		}
	}
	// A 1×1 crop scaled up is a flat image of that pixel.
	out := make([]byte, 3*4*4)
	newResampler(4, NHWC).resize(gradient(3, 3), Crop{X: 2, Y: 1, W: 1, H: 1}, out)
	for i := 0; i < len(out); i += 3 {
		if out[i] != 2 || out[i+1] != 1 || out[i+2] != 3 {
			t.Fatalf("upscaled pixel %d is %v, want [2 1 3]", i/3, out[i:i+3])
		}
	}
}
