package pipeline

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsock/tsock/producer/source"
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

// A worker trims after every sample: one large image grows its buffers,
// the next usual one finds them given back (with the limit lowered
// here), while buffers within the limit stay for the next sample.
func TestWorkersTrimAfterEachSample(t *testing.T) {
	defer func(old int) { keepBytes = old }(keepBytes)
	keepBytes = 3 * 100 * 100
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, side := range map[string]int{"0-large.png": 400, "1-usual.png": 64} {
		if err := os.WriteFile(filepath.Join(dir, "a", name), encodePNG(t, image.NewNRGBA(image.Rect(0, 0, side, side))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := testWorker(t, src, 32, "go")
	out := make([]byte, 3*32*32)
	if err := w.make(&task{index: 0, buf: out}); err != nil {
		t.Fatal(err)
	}
	if w.img.Pix != nil {
		t.Fatalf("after a 400x400 sample the worker keeps a %d-byte buffer (limit %d)", cap(w.img.Pix), keepBytes)
	}
	if err := w.make(&task{index: 1, buf: out}); err != nil {
		t.Fatal(err)
	}
	if w.img.Pix == nil {
		t.Fatal("a 64x64 sample's buffer was given back: every sample would allocate anew")
	}
}
