package source

import (
	"bufio"
	"fmt"
	"image"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
)

// GenOptions shapes a generated dataset.
type GenOptions struct {
	Images, Classes  int
	MinSide, MaxSide int // each side drawn from [MinSide, MaxSide]
	Quality          int // JPEG quality
}

// WriteFolder writes a JPEG dataset in ImageFolder form under dir: the
// synthetic source's pictures, so labels are learnable from the pixels.
// The same options always give the same files.
func WriteFolder(dir string, o GenOptions) error {
	if o.Images <= 0 || o.Classes <= 0 || o.MinSide <= 0 || o.MaxSide < o.MinSide {
		return fmt.Errorf("generate dataset: bad options %+v", o)
	}
	var pix []byte
	rgba := &image.RGBA{}
	for i := 0; i < o.Images; i++ {
		label := i * o.Classes / o.Images
		rng := rand.New(rand.NewPCG(uint64(i), 0x9e4))
		w := o.MinSide + rng.IntN(o.MaxSide-o.MinSide+1)
		h := o.MinSide + rng.IntN(o.MaxSide-o.MinSide+1)
		pix = slices.Grow(pix[:0], 3*w*h)[:3*w*h]
		paint(pix, w, h, label, o.Classes, rng)
		toRGBA(pix, w, h, rgba)
		class := filepath.Join(dir, fmt.Sprintf("class%03d", label))
		if err := os.MkdirAll(class, 0o755); err != nil {
			return fmt.Errorf("generate dataset: %w", err)
		}
		if err := writeJPEG(filepath.Join(class, fmt.Sprintf("img%06d.jpg", i)), rgba, o.Quality); err != nil {
			return fmt.Errorf("generate dataset: %w", err)
		}
	}
	return nil
}

func toRGBA(pix []byte, w, h int, dst *image.RGBA) {
	n := 4 * w * h
	if cap(dst.Pix) < n {
		dst.Pix = make([]byte, n)
	}
	dst.Pix, dst.Stride, dst.Rect = dst.Pix[:n], 4*w, image.Rect(0, 0, w, h)
	for i, j := 0, 0; i < len(pix); i, j = i+3, j+4 {
		dst.Pix[j], dst.Pix[j+1], dst.Pix[j+2], dst.Pix[j+3] = pix[i], pix[i+1], pix[i+2], 255
	}
}

func writeJPEG(path string, img image.Image, quality int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := jpeg.Encode(w, img, &jpeg.Options{Quality: quality}); err != nil {
		f.Close()
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
