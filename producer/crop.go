package producer

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Crop is the source rectangle one sample is cut from, and whether it is
// mirrored left to right.
type Crop struct {
	X, Y, W, H int
	Flip       bool
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

// randomResizedCrop follows torchvision's RandomResizedCrop.get_params:
// ten tries at a random area and aspect ratio, then a centre crop with the
// ratio clamped.
func randomResizedCrop(rng *rand.Rand, w, h int) Crop {
	area := float64(w * h)
	logLo, logHi := math.Log(3.0/4.0), math.Log(4.0/3.0)
	for range 10 {
		target := area * (0.08 + rng.Float64()*(1-0.08))
		ratio := math.Exp(logLo + rng.Float64()*(logHi-logLo))
		cw := int(math.Round(math.Sqrt(target * ratio)))
		ch := int(math.Round(math.Sqrt(target / ratio)))
		if cw > 0 && cw <= w && ch > 0 && ch <= h {
			return Crop{X: rng.IntN(w - cw + 1), Y: rng.IntN(h - ch + 1), W: cw, H: ch}
		}
	}
	inRatio := float64(w) / float64(h)
	cw, ch := w, h
	switch {
	case inRatio < 3.0/4.0:
		ch = max(1, int(math.Round(float64(w)/(3.0/4.0))))
	case inRatio > 4.0/3.0:
		cw = max(1, int(math.Round(float64(h)*(4.0/3.0))))
	}
	cw, ch = min(cw, w), min(ch, h)
	return Crop{X: (w - cw) / 2, Y: (h - ch) / 2, W: cw, H: ch}
}

// cropFor picks sample index's crop in epoch for an image of w×h.
func cropFor(t Transform, seed uint64, epoch, index, w, h int) Crop {
	if t == Eval {
		side := max(1, int(math.Round(float64(min(w, h))*0.875)))
		return Crop{X: (w - side) / 2, Y: (h - side) / 2, W: side, H: side}
	}
	rng := sampleRNG(seed, epoch, index)
	c := randomResizedCrop(rng, w, h)
	c.Flip = rng.IntN(2) == 1
	return c
}
