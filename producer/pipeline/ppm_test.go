package pipeline

import (
	"bytes"
	"context"
	"testing"

	"github.com/tsock/tsock/producer/source"
)

// The synthetic source's PPM decodes to the very pixels it painted, and
// a PPM that lies about its size is refused.
func TestPPMDecodesWhatWasPainted(t *testing.T) {
	src := source.NewSyntheticSized(3, 2, 5, 9)
	var scratch []byte
	data, err := src.Encoded(context.Background(), 1, &scratch)
	if err != nil {
		t.Fatal(err)
	}
	var img RGB
	if err := decodeImage(data, &img); err != nil {
		t.Fatal(err)
	}
	if img.W < 5 || img.W > 9 || img.H < 5 || img.H > 9 || !bytes.HasSuffix(data, img.Pix) || len(data)-len(img.Pix) > 16 {
		t.Fatalf("decoded %dx%d from %d bytes", img.W, img.H, len(data))
	}
	for _, bad := range []string{"P6\n2 2\n255\nabc", "P6\n0 2\n255\n", "P6\n2 2\n65535\n" + string(make([]byte, 24)), "P6\n99999999999 1\n255\n", "P6 2"} {
		if err := decodeImage([]byte(bad), &img); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

// FuzzDecode: any bytes decode or are refused with an error, never a
// panic or an allocation beyond the bounds.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("P6\n2 1\n255\nabcdef"))
	f.Add([]byte("P6\n1 1\n255 abc"))
	f.Add([]byte{0xff, 0xd8, 0xff, 0xe0})
	f.Add([]byte("\x89PNG\r\n\x1a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var img RGB
		if err := decodeImage(data, &img); err == nil && len(img.Pix) != 3*img.W*img.H {
			t.Fatalf("decoded %dx%d into %d bytes", img.W, img.H, len(img.Pix))
		}
	})
}
