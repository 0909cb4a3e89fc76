package pipeline

import (
	"bytes"
	"context"
	"image"
	"os"
	"path/filepath"
	"testing"

	"github.com/tsock/tsock/producer/pipeline/internal/turbo"
	"github.com/tsock/tsock/producer/source"
)

// regionWorker is a libjpeg-turbo worker over a folder of photos.
func regionWorker(t *testing.T, dir string) (*worker, *source.Folder) {
	t.Helper()
	opened, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, ok := opened.(*source.Folder)
	if !ok {
		t.Fatalf("%s opened as %T", dir, opened)
	}
	return testWorker(t, src, 64, DecoderTurbo), src
}

// Decoding only the crop must give the very bytes of decoding the whole
// image at the same scale and cutting the crop from it: for the train
// crop, and for the eval crop, whose filter reads past its box.
func TestRegionDecodeEqualsWholeDecode(t *testing.T) {
	dir := t.TempDir()
	if err := source.WriteFolder(dir, source.GenOptions{Images: 12, Classes: 2, MinSide: 90, MaxSide: 400, Quality: 90}); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []Transform{Train, Eval} {
		t.Run(string(tr), func(t *testing.T) {
			w, src := regionWorker(t, dir)
			w.cfg.Transform = tr
			regionEqualsWhole(t, w, src)
		})
	}
}

func regionEqualsWhole(t *testing.T, w *worker, src *source.Folder) {
	whole := &RGB{}
	for i := 0; i < src.Len(); i++ {
		data, err := os.ReadFile(src.Name(i))
		if err != nil {
			t.Fatal(err)
		}
		for epoch := range 6 {
			got := make([]byte, 3*64*64)
			if err := w.make(&task{index: i, epoch: epoch, buf: got}); err != nil {
				t.Fatalf("sample %d epoch %d: %v", i, epoch, err)
			}
			fw, fh, err := w.tj.Header(data)
			if err != nil {
				t.Fatal(err)
			}
			c := cropFor(w.cfg.Transform, 0, epoch, i, fw, fh, 64)
			num := decodeScale(w.cfg.Transform, 64, c)
			whole.reset(turbo.Scaled(fw, num), turbo.Scaled(fh, num))
			if _, _, err := w.tj.Decode(data, num, turbo.Region{W: whole.W, H: whole.H}, true, whole.Pix); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, 3*64*64)
			if err := w.rs.resize(whole, scaleCrop(c, num, whole.W, whole.H), want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("sample %d (%dx%d) epoch %d, crop %+v at %d/8: region decode differs from the whole decode",
					i, fw, fh, epoch, c, num)
			}
		}
	}
}

// A CMYK JPEG (PIL's, Adobe-inverted) is a sample with its colours, not
// a skipped file (turbo's own test checks the bytes against PIL's).
func TestCMYKJPEGKeepsItsColours(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("internal/turbo/testdata/cmyk.jpg")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "cmyk.jpg"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	w, _ := regionWorker(t, dir)
	out := make([]byte, 3*64*64)
	if err := w.make(&task{index: 0, epoch: 0, buf: out}); err != nil {
		t.Fatalf("CMYK sample: %v", err)
	}
	// The picture is blue 128 everywhere: the fallback kept the colours.
	plane := 64 * 64
	var blue int
	for _, v := range out[2*plane:] {
		blue += int(v)
	}
	if mean := blue / plane; mean < 110 || mean > 146 {
		t.Fatalf("blue mean %d, want about 128", mean)
	}
}

// A PNG named .jpg (common in scraped datasets) is read by its content,
// as PIL does, not skipped.
func TestPNGUnderAJPGName(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := image.NewNRGBA(image.Rect(0, 0, 80, 60))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = 200, 50, 10, 255
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "photo.jpg"), encodePNG(t, img), 0o644); err != nil {
		t.Fatal(err)
	}
	w, _ := regionWorker(t, dir)
	out := make([]byte, 3*64*64)
	if err := w.make(&task{index: 0, epoch: 0, buf: out}); err != nil {
		t.Fatalf("PNG content under a .jpg name: %v", err)
	}
	for ch, want := range []byte{200, 50, 10} {
		if got := out[ch*64*64+64*32+32]; got != want {
			t.Fatalf("channel %d: %d, want %d", ch, got, want)
		}
	}
}
