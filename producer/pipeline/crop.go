package pipeline

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Crop is where one sample comes from: the rectangle of source pixels
// its filter may read, the box within it that is resized to S×S, and
// whether it is mirrored left to right. The train transform cuts its crop
// and then resizes it (torchvision's resized_crop): box and rectangle are
// the same. The eval transform resizes the whole image and then cuts the
// centre: the box is fractional, and the filter reads past it up to the
// image's edges.
type Crop struct {
	X, Y, W, H int
	Box        Box // zero: the whole rectangle
	Flip       bool
}

// Box is an area of the source in pixels, fractional.
type Box struct{ X, Y, W, H float64 }

// box is the area resized to S×S.
func (c Crop) box() Box {
	if c.Box == (Box{}) {
		return Box{float64(c.X), float64(c.Y), float64(c.W), float64(c.H)}
	}
	return c.Box
}

// Transform names how samples are cropped.
type Transform string

// The transforms.
const (
	// Train is RandomResizedCrop(scale 0.08–1, ratio 3/4–4/3) and a
	// horizontal flip with p=0.5, as torchvision does it.
	Train Transform = "train"
	// Eval resizes the shorter side to S/0.875 and cuts the centre S×S:
	// the usual validation transform, with no randomness.
	Eval Transform = "eval"
)

// ParseTransform checks a --transform value.
func ParseTransform(s string) (Transform, error) {
	switch Transform(s) {
	case Train, Eval:
		return Transform(s), nil
	}
	return "", fmt.Errorf("transform %q: want train or eval", s)
}

// sampleRNG is the random stream of one sample in one epoch.
func sampleRNG(seed uint64, epoch, index int) *rand.Rand {
	return rand.New(rand.NewPCG(seed^uint64(epoch)*0x9e3779b97f4a7c15, uint64(index)))
}

// draws are the random numbers a crop takes (a *rand.Rand; a script in
// the test that replays torchvision's).
type draws interface {
	Float64() float64
	IntN(n int) int
}

// pyRound is Python's round(): halves go to the even neighbour.
func pyRound(x float64) int { return int(math.RoundToEven(x)) }

// randomResizedCrop follows torchvision's RandomResizedCrop.get_params,
// draw for draw: ten tries at a random area and aspect ratio (top drawn
// before left), then a centre crop with the ratio clamped.
func randomResizedCrop(rng draws, w, h int) Crop {
	area := float64(w * h)
	logLo, logHi := math.Log(3.0/4.0), math.Log(4.0/3.0)
	for range 10 {
		target := area * (0.08 + rng.Float64()*(1-0.08))
		ratio := math.Exp(logLo + rng.Float64()*(logHi-logLo))
		cw := pyRound(math.Sqrt(target * ratio))
		ch := pyRound(math.Sqrt(target / ratio))
		if cw > 0 && cw <= w && ch > 0 && ch <= h {
			top := rng.IntN(h - ch + 1)
			return Crop{X: rng.IntN(w - cw + 1), Y: top, W: cw, H: ch}
		}
	}
	inRatio := float64(w) / float64(h)
	cw, ch := w, h
	switch {
	case inRatio < 3.0/4.0:
		ch = max(1, pyRound(float64(w)/(3.0/4.0)))
	case inRatio > 4.0/3.0:
		cw = max(1, pyRound(float64(h)*(4.0/3.0)))
	}
	cw, ch = min(cw, w), min(ch, h)
	return Crop{X: (w - cw) / 2, Y: (h - ch) / 2, W: cw, H: ch}
}

// evalCrop is torchvision's Resize(round(S/0.875)) then CenterCrop(S),
// as one box of the source: the shorter side resized to R, the longer to
// int(R·long/short), each axis with its own scale, and the centre S×S cut
// at round((side-S)/2) of the resized image. The filter reads the whole
// image, as the resize does.
func evalCrop(size, w, h int) Crop {
	r := pyRound(float64(size) / 0.875)
	short, long := min(w, h), max(w, h)
	newShort, newLong := r, int(float64(r)*float64(long)/float64(short))
	nw, nh := newShort, newLong
	if w > h {
		nw, nh = newLong, newShort
	}
	sx, sy := float64(w)/float64(nw), float64(h)/float64(nh)
	// A side shorter than S (tiny images): CenterCrop pads; take it all.
	left, top := pyRound(float64(nw-size)/2), pyRound(float64(nh-size)/2)
	box := Box{X: float64(left) * sx, Y: float64(top) * sy, W: float64(size) * sx, H: float64(size) * sy}
	box.X, box.Y = max(box.X, 0), max(box.Y, 0)
	box.W, box.H = min(box.W, float64(w)-box.X), min(box.H, float64(h)-box.Y)
	return Crop{W: w, H: h, Box: box}
}

// cropFor picks sample index's crop in epoch for an image of w×h, S×S.
func cropFor(t Transform, seed uint64, epoch, index, w, h, size int) Crop {
	if t == Eval {
		return evalCrop(size, w, h)
	}
	rng := sampleRNG(seed, epoch, index)
	c := randomResizedCrop(rng, w, h)
	c.Flip = rng.IntN(2) == 1
	return c
}
