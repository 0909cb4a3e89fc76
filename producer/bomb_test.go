package producer

import (
	"bytes"
	"image"
	"image/png"
	"strings"
	"testing"
)

func encodePNG(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A decompression bomb is refused by the bytes it would decode into, not
// only by its pixels: the same 400×400 pixels pass as 8-bit RGBA and are
// refused as 16-bit RGBA once that is over the limit (lowered here; a
// 16-bit 10240² PNG of 815 KB took 2.4 GiB before).
func TestDecodeIsBoundedInBytes(t *testing.T) {
	defer func(old int64) { maxDecodeBytes = old }(maxDecodeBytes)
	maxDecodeBytes = 1 << 20
	var dst RGB
	if err := decodeImage(encodePNG(t, image.NewNRGBA(image.Rect(0, 0, 400, 400))), &dst); err != nil {
		t.Fatalf("8-bit 400x400 (640 KB decoded): %v", err)
	}
	err := decodeImage(encodePNG(t, image.NewRGBA64(image.Rect(0, 0, 400, 400))), &dst)
	if err == nil || !strings.Contains(err.Error(), "decodes to 1280000 bytes: over the 1048576-byte limit") {
		t.Fatalf("16-bit 400x400 (1.28 MB decoded) over a 1 MiB limit: %v", err)
	}
}

// A worker gives back a buffer that one large sample grew, rather than
// keeping it for the rest of the run.
func TestWorkersGiveBackLargeBuffers(t *testing.T) {
	big := RGB{Pix: make([]byte, keepBytes+1)}
	big.trim()
	if big.Pix != nil {
		t.Fatal("a buffer over keepBytes was kept")
	}
	usual := RGB{Pix: make([]byte, 3*500*375)}
	usual.trim()
	if usual.Pix == nil {
		t.Fatal("a photo-sized buffer was given back: every sample would allocate anew")
	}
}
