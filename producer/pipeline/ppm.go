package pipeline

import (
	"bytes"
	"fmt"
	"strconv"
)

// ppmMagic starts a binary PPM: the synthetic source's pixels.
var ppmMagic = []byte("P6")

// decodePPM reads a binary PPM (P6, maxval 255, one whitespace after the
// header as the synthetic source writes it) into dst: raw pixels, copied.
// Anything else is refused, never guessed at.
func decodePPM(data []byte, dst *RGB) error {
	rest := data[len(ppmMagic):]
	var fields [3]int
	for k := range fields {
		rest = bytes.TrimLeft(rest, " \t\r\n")
		end := bytes.IndexAny(rest, " \t\r\n")
		if end <= 0 || end > 10 {
			return fmt.Errorf("ppm: bad header")
		}
		v, err := strconv.Atoi(string(rest[:end]))
		if err != nil || v <= 0 {
			return fmt.Errorf("ppm: bad header field %q", rest[:end])
		}
		fields[k], rest = v, rest[end+1:]
	}
	w, h, maxval := fields[0], fields[1], fields[2]
	if maxval != 255 {
		return fmt.Errorf("ppm: maxval %d: only 255 is read", maxval)
	}
	if int64(w)*int64(h) > MaxPixels {
		return fmt.Errorf("ppm of %dx%d pixels: outside 1..%d pixels", w, h, MaxPixels)
	}
	if len(rest) != 3*w*h {
		return fmt.Errorf("ppm of %dx%d pixels: %d bytes of pixels, want %d", w, h, len(rest), 3*w*h)
	}
	dst.reset(w, h)
	copy(dst.Pix, rest)
	return nil
}
