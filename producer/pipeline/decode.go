package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/gif"  // registers GIF
	_ "image/jpeg" // registers JPEG
	_ "image/png"  // registers PNG

	_ "golang.org/x/image/bmp"  // registers BMP
	_ "golang.org/x/image/tiff" // registers TIFF
	_ "golang.org/x/image/webp" // registers WebP
)

// MaxPixels bounds a source image: a header that claims more is refused
// before the decoder allocates for it.
const MaxPixels = 100 << 20

// maxDecodeBytes bounds the memory one image may decode into (the
// decoder's own image, before tsock's RGB copy): the pixel bound alone let
// a 16-bit RGBA PNG of 10240² (815 KB on disk) take 2.4 GiB per worker.
// A variable so that tests can lower it.
var maxDecodeBytes int64 = 512 << 20

// bytesPerPixel is what the standard decoders allocate per pixel for a
// color model; unknown models count as the widest (16-bit RGBA).
func bytesPerPixel(m color.Model) int64 {
	switch m {
	case color.GrayModel, color.AlphaModel:
		return 1
	case color.Gray16Model, color.Alpha16Model:
		return 2
	case color.YCbCrModel:
		return 3
	case color.RGBAModel, color.NRGBAModel, color.CMYKModel, color.NYCbCrAModel:
		return 4
	}
	if _, ok := m.(color.Palette); ok {
		return 1
	}
	return 8
}

// ErrEmpty is a zero-byte input.
var ErrEmpty = errors.New("empty file")

// decodeImage decodes an encoded image (any registered format) into dst.
func decodeImage(data []byte, dst *RGB) (err error) {
	if len(data) == 0 {
		return ErrEmpty
	}
	if bytes.HasPrefix(data, ppmMagic) {
		return decodePPM(data, dst)
	}
	// The standard decoders are not meant to panic, but a daemon that
	// serves many trainings must not die for one bad file if they do.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panic: %v", r)
		}
	}()
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return fmt.Errorf("%s of %dx%d pixels: outside 1..%d pixels", format, cfg.Width, cfg.Height, MaxPixels)
	}
	if n := int64(cfg.Width) * int64(cfg.Height) * bytesPerPixel(cfg.ColorModel); n > maxDecodeBytes {
		return fmt.Errorf("%s of %dx%d pixels decodes to %d bytes: over the %d-byte limit per image", format,
			cfg.Width, cfg.Height, n, maxDecodeBytes)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("decode %s: %w", format, err)
	}
	dst.fromImage(img)
	return nil
}
