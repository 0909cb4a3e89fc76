package producer

import (
	"bytes"
	"errors"
	"fmt"
	"image"
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

// ErrEmpty is a zero-byte input.
var ErrEmpty = errors.New("empty file")

// decodeImage decodes an encoded image (any registered format) into dst.
func decodeImage(data []byte, dst *RGB) (err error) {
	if len(data) == 0 {
		return ErrEmpty
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
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("decode %s: %w", format, err)
	}
	dst.fromImage(img)
	return nil
}
