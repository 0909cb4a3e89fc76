package pipeline

import (
	"math"
	"math/rand/v2"
	"testing"
)

// referenceResize is the antialiased bilinear resize written the plain
// way, in float with one rounding: what the fixed-point passes must match.
func referenceResize(src *RGB, c Crop, S int, layout Layout) []byte {
	weights := func(lo, span, i int) map[int]float64 {
		scale := float64(span) / float64(S)
		support := math.Max(scale, 1)
		center := float64(lo) + (float64(i)+0.5)*scale
		ws, sum := map[int]float64{}, 0.0
		for j := lo; j < lo+span; j++ {
			if wt := 1 - math.Abs((float64(j)+0.5-center)/support); wt > 0 {
				ws[j], sum = wt, sum+wt
			}
		}
		for j := range ws {
			ws[j] /= sum
		}
		return ws
	}
	out := make([]byte, 3*S*S)
	for y := 0; y < S; y++ {
		wy := weights(c.Y, c.H, y)
		for x := 0; x < S; x++ {
			wx := weights(c.X, c.W, x)
			ox := x
			if c.Flip {
				ox = S - 1 - x
			}
			for ch := 0; ch < 3; ch++ {
				var v float64
				for sy, a := range wy {
					for sx, b := range wx {
						v += a * b * float64(src.Pix[3*(sy*src.W+sx)+ch])
					}
				}
				i := ch*S*S + y*S + ox
				if layout == NHWC {
					i = 3*(y*S+ox) + ch
				}
				out[i] = uint8(math.Round(math.Min(255, math.Max(0, v))))
			}
		}
	}
	return out
}

func TestResizeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 40 {
		src := &RGB{}
		src.reset(20+rng.IntN(120), 20+rng.IntN(120))
		// Smooth content with noise: rounding between passes stays small.
		for y := 0; y < src.H; y++ {
			for x := 0; x < src.W; x++ {
				for ch := 0; ch < 3; ch++ {
					src.Pix[3*(y*src.W+x)+ch] = uint8(x*(ch+1) + y*2 + rng.IntN(40))
				}
			}
		}
		S := 4 + rng.IntN(40)
		c := Crop{W: 1 + rng.IntN(src.W), H: 1 + rng.IntN(src.H), Flip: rng.IntN(2) == 1}
		c.X, c.Y = rng.IntN(src.W-c.W+1), rng.IntN(src.H-c.H+1)
		layout := []Layout{NCHW, NHWC}[trial%2]
		got := make([]byte, 3*S*S)
		if err := newResampler(S, layout).resize(src, c, got); err != nil {
			t.Fatal(err)
		}
		want := referenceResize(src, c, S, layout)
		var sum, worst int
		for i := range got {
			d := int(got[i]) - int(want[i])
			sum, worst = sum+abs(d), max(worst, abs(d))
		}
		// Two passes round twice: at most a step or two apart.
		if mean := float64(sum) / float64(len(got)); worst > 2 || mean > 0.5 {
			t.Fatalf("trial %d: %dx%d crop %+v to %d %s: worst %d, mean %.2f from the reference",
				trial, src.W, src.H, c, S, layout, worst, mean)
		}
	}
}

func TestResizeRefusesACropOutsideTheImage(t *testing.T) {
	src := gradient(10, 10)
	out := make([]byte, 3*4*4)
	for _, c := range []Crop{{X: 8, W: 4, H: 2}, {Y: -1, W: 2, H: 2}, {W: 0, H: 3}, {W: 10, H: 11}} {
		if err := newResampler(4, NCHW).resize(src, c, out); err == nil {
			t.Errorf("crop %+v of a 10x10 image accepted", c)
		}
	}
	if err := newResampler(4, NCHW).resize(src, Crop{W: 2, H: 2}, out[:10]); err == nil {
		t.Error("a destination too small accepted")
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// BenchmarkResize is the crop-resize-flip-layout pass alone.
func BenchmarkResize(b *testing.B) {
	src := &RGB{}
	src.reset(500, 375)
	for i := range src.Pix {
		src.Pix[i] = byte(i)
	}
	rs := newResampler(224, NCHW)
	dst := make([]byte, 3*224*224)
	for b.Loop() {
		rs.resize(src, Crop{X: 50, Y: 20, W: 300, H: 280, Flip: true}, dst)
	}
}
