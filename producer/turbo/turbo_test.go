package turbo

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"testing"
)

// photo encodes a smooth w×h test picture as a JPEG.
func photo(t testing.TB, w, h int) ([]byte, image.Image) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8((x + y) % 256), 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	dec, err := jpeg.Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), dec
}

func newDecoder(t *testing.T) *Decoder {
	t.Helper()
	d, err := NewDecoder()
	if err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	t.Cleanup(d.Close)
	return d
}

func TestDecodeMatchesGo(t *testing.T) {
	d := newDecoder(t)
	data, ref := photo(t, 96, 64)
	w, h, err := d.Header(data)
	if err != nil || w != 96 || h != 64 {
		t.Fatalf("header %dx%d %v", w, h, err)
	}
	out := make([]byte, 3*w*h)
	if err := d.Decode(data, w, h, 8, out); err != nil {
		t.Fatal(err)
	}
	var diff int
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			r, g, b, _ := ref.At(x, y).RGBA()
			p := out[3*(y*w+x):]
			diff += abs(int(p[0])-int(r>>8)) + abs(int(p[1])-int(g>>8)) + abs(int(p[2])-int(b>>8))
		}
	}
	if mean := float64(diff) / float64(3*w*h); mean > 2 {
		t.Fatalf("mean difference from Go's decoder %.2f per channel", mean)
	}
}

func TestScaledDecode(t *testing.T) {
	d := newDecoder(t)
	data, _ := photo(t, 100, 60)
	for _, num := range []int{1, 2, 4, 8} {
		sw, sh := Scaled(100, num), Scaled(60, num)
		out := make([]byte, 3*sw*sh)
		if err := d.Decode(data, 100, 60, num, out); err != nil {
			t.Fatalf("%d/8: %v", num, err)
		}
		// The scaled picture keeps the gradient: red grows left to right.
		if left, right := out[3*(sh/2*sw)], out[3*(sh/2*sw+sw-1)]; left >= right {
			t.Fatalf("%d/8 (%dx%d): red %d at the left, %d at the right", num, sw, sh, left, right)
		}
	}
	if err := d.Decode(data, 100, 60, 9, make([]byte, 1<<20)); err == nil {
		t.Fatal("scale 9/8 accepted")
	}
}

func TestCorruptIsAnError(t *testing.T) {
	d := newDecoder(t)
	data, _ := photo(t, 64, 64)
	for name, bad := range map[string][]byte{
		"truncated": data[:len(data)/2],
		"garbage":   []byte("not a jpeg at all"),
		"empty":     nil,
	} {
		w, h, err := d.Header(bad)
		if err == nil {
			err = d.Decode(bad, w, h, 8, make([]byte, 3*w*h+1))
		}
		if err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func BenchmarkDecode500x375(b *testing.B) {
	d, err := NewDecoder()
	if err != nil {
		b.Skip(err)
	}
	defer d.Close()
	data, _ := photo(b, 500, 375)
	for _, num := range []int{8, 4} {
		out := make([]byte, 3*Scaled(500, num)*Scaled(375, num))
		b.Run(map[int]string{8: "full", 4: "half"}[num], func(b *testing.B) {
			for b.Loop() {
				if err := d.Decode(data, 500, 375, num, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
