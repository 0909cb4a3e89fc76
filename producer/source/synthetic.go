package source

import (
	"context"
	"fmt"
	"math/rand/v2"
)

// Synthetic generates images in memory: sizes vary like photographs and the
// picture depends on the class (its colour and stripe direction), so a
// model can learn the labels from the pixels.
type Synthetic struct {
	n, classes       int
	minSide, maxSide int
}

// NewSynthetic returns a source of n photo-sized images in the given
// number of classes.
func NewSynthetic(n, classes int) *Synthetic { return NewSyntheticSized(n, classes, 240, 480) }

// NewSyntheticSized is NewSynthetic with sides drawn from [minSide, maxSide].
func NewSyntheticSized(n, classes, minSide, maxSide int) *Synthetic {
	return &Synthetic{n: n, classes: classes, minSide: minSide, maxSide: maxSide}
}

// Describe implements Source.
func (s *Synthetic) Describe() string { return fmt.Sprintf("synthetic:%d", s.n) }

// Len implements Source.
func (s *Synthetic) Len() int { return s.n }

// Classes implements Source.
func (s *Synthetic) Classes() []string {
	names := make([]string, s.classes)
	for i := range names {
		names[i] = fmt.Sprintf("class%02d", i)
	}
	return names
}

// Label implements Source: samples are grouped by class, like a folder.
func (s *Synthetic) Label(i int) int { return i * s.classes / s.n }

// Name implements Source.
func (s *Synthetic) Name(i int) string { return fmt.Sprintf("synthetic #%d", i) }

// Encoded implements Source: the picture as a binary PPM (P6), pixels
// that need no decoding, so that the pipeline is the one place that
// turns a sample's bytes into an image.
func (s *Synthetic) Encoded(_ context.Context, i int, scratch *[]byte) ([]byte, error) {
	rng := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	span := s.maxSide - s.minSide + 1
	w, h := s.minSide+rng.IntN(span), s.minSide+rng.IntN(span)
	head := fmt.Appendf((*scratch)[:0], "P6\n%d %d\n255\n", w, h)
	n := len(head) + 3*w*h
	if cap(head) < n {
		head = append(make([]byte, 0, n), head...)
	}
	b := head[:n]
	paint(b[len(head):], w, h, s.Label(i), s.classes, rng)
	*scratch = b
	return b, nil
}

// paint draws class label's picture into pix (packed RGB, w×h): a colour
// from a wheel, stripes whose angle depends on the class, and per-image
// noise and phase.
func paint(pix []byte, w, h, label, classes int, rng *rand.Rand) {
	hue := float64(label) / float64(classes)
	r0, g0, b0 := wheel(hue)
	dx, dy := 1+label%3, 1+(label/3)%3
	phase := rng.IntN(64)
	noise := rng.Uint64()
	for y := 0; y < h; y++ {
		row := pix[3*w*y:]
		for x := 0; x < w; x++ {
			noise = noise*6364136223846793005 + 1442695040888963407
			n := int(noise>>61) - 4 // mild sensor noise: photos are mostly smooth
			stripe := 0
			if ((x*dx+y*dy+phase)/16)%2 == 0 {
				stripe = 60
			}
			row[3*x] = clamp8(r0 + stripe + n)
			row[3*x+1] = clamp8(g0 + stripe + n)
			row[3*x+2] = clamp8(b0 + stripe + n)
		}
	}
}

// wheel maps a hue in [0,1) to a saturated colour.
func wheel(hue float64) (r, g, b int) {
	h := hue * 6
	f := int((h - float64(int(h))) * 180)
	switch int(h) % 6 {
	case 0:
		return 180, f, 0
	case 1:
		return 180 - f, 180, 0
	case 2:
		return 0, 180, f
	case 3:
		return 0, 180 - f, 180
	case 4:
		return f, 0, 180
	default:
		return 180, 0, 180 - f
	}
}

func clamp8(v int) byte {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return byte(v)
}
