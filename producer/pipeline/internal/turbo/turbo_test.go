package turbo

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"testing"
)

// photo encodes a w×h test picture as a JPEG (4:2:0, as most photos are);
// detail puts fine structure in every block.
func photo(t testing.TB, w, h int) ([]byte, image.Image) { return picture(t, w, h, 1) }

func detailed(t testing.TB, w, h int) ([]byte, image.Image) { return picture(t, w, h, 7) }

func picture(t testing.TB, w, h, detail int) ([]byte, image.Image) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8((x*detail + y) % 256), 255})
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

// full decodes the whole image at num/8.
func full(t *testing.T, d *Decoder, data []byte, w, h, num int) []byte {
	t.Helper()
	sw, sh := Scaled(w, num), Scaled(h, num)
	out := make([]byte, 3*sw*sh)
	x, width, err := d.Decode(data, num, Region{0, 0, sw, sh}, true, out)
	if err != nil || x != 0 || width != sw {
		t.Fatalf("full decode at %d/8: columns %d+%d of %d, %v", num, x, width, sw, err)
	}
	return out
}

func TestDecodeMatchesGo(t *testing.T) {
	d := newDecoder(t)
	data, ref := photo(t, 96, 64)
	w, h, err := d.Header(data)
	if err != nil || w != 96 || h != 64 {
		t.Fatalf("header %dx%d %v", w, h, err)
	}
	out := full(t, d, data, w, h, 8)
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

// A region is the same pixels as the full decode at the same scale: the
// decoder may only widen it to iMCU columns, never shift or blur it.
func TestRegionMatchesFullDecode(t *testing.T) {
	d := newDecoder(t)
	const W, H = 333, 250
	data, _ := detailed(t, W, H)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, num := range []int{8, 7, 5, 4, 2, 1} {
		sw, sh := Scaled(W, num), Scaled(H, num)
		ref := full(t, d, data, W, H, num)
		for i := range 60 {
			r := Region{W: 1 + rng.IntN(sw), H: 1 + rng.IntN(sh)}
			r.X, r.Y = rng.IntN(sw-r.W+1), rng.IntN(sh-r.H+1)
			if i%3 == 0 { // start on an iMCU column
				r.X -= r.X % 16
			}
			out := make([]byte, 3*sw*r.H)
			x, width, err := d.Decode(data, num, r, rng.IntN(2) == 0, out)
			if err != nil {
				t.Fatalf("%d/8 %+v: %v", num, r, err)
			}
			if x > r.X || x+width < r.X+r.W || x+width > sw {
				t.Fatalf("%d/8 %+v: decoded columns %d+%d do not cover it", num, r, x, width)
			}
			var diff, worst int
			for y := 0; y < r.H; y++ {
				for i := 3 * r.X; i < 3*(r.X+r.W); i++ {
					e := abs(int(out[3*width*y+i-3*x]) - int(ref[3*sw*(r.Y+y)+i]))
					diff, worst = diff+e, max(worst, e)
				}
			}
			if mean := float64(diff) / float64(3*r.W*r.H); mean > 0 || worst > 0 {
				t.Fatalf("%d/8 %+v: differs from the full decode: mean %.3f, worst %d", num, r, mean, worst)
			}
		}
	}
}

func TestScaledDecodeKeepsThePicture(t *testing.T) {
	d := newDecoder(t)
	data, _ := photo(t, 100, 60)
	for _, num := range []int{1, 2, 4, 8} {
		sw, sh := Scaled(100, num), Scaled(60, num)
		out := full(t, d, data, 100, 60, num)
		// The scaled picture keeps the gradient: red grows left to right.
		if left, right := out[3*(sh/2*sw)], out[3*(sh/2*sw+sw-1)]; left >= right {
			t.Fatalf("%d/8 (%dx%d): red %d at the left, %d at the right", num, sw, sh, left, right)
		}
	}
}

func TestBadArgumentsAreErrors(t *testing.T) {
	d := newDecoder(t)
	data, _ := photo(t, 64, 48)
	big := make([]byte, 1<<20)
	for name, call := range map[string]func() error{
		"scale 9/8":        func() error { _, _, err := d.Decode(data, 9, Region{0, 0, 8, 8}, false, big); return err },
		"region outside":   func() error { _, _, err := d.Decode(data, 8, Region{60, 0, 8, 8}, false, big); return err },
		"empty region":     func() error { _, _, err := d.Decode(data, 8, Region{0, 0, 0, 8}, false, big); return err },
		"buffer too small": func() error { _, _, err := d.Decode(data, 8, Region{0, 0, 64, 48}, false, big[:100]); return err },
	} {
		if err := call(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// The decoder is still good after the errors.
	full(t, d, data, 64, 48, 8)
}

func TestCorruptIsAnError(t *testing.T) {
	d := newDecoder(t)
	data, _ := photo(t, 64, 64)
	for name, bad := range map[string][]byte{
		"truncated": data[:len(data)/2],
		"garbage":   []byte("not a jpeg at all"),
		"empty":     nil,
	} {
		_, _, err := d.Header(bad)
		if err == nil {
			_, _, err = d.Decode(bad, 8, Region{0, 0, 64, 64}, true, make([]byte, 3*64*64))
		}
		if err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

// The invariant callers build on: damage below a region goes unseen by a
// partial decode, and is found by a verifying one.
func TestVerifyFindsDamageOutsideTheRegion(t *testing.T) {
	d := newDecoder(t)
	data, _ := photo(t, 256, 256)
	cut := data[:len(data)*3/4]
	top := Region{0, 0, 64, 32}
	out := make([]byte, 3*256*32)
	if _, _, err := d.Decode(cut, 8, top, false, out); err != nil {
		t.Fatalf("partial decode of the intact top: %v", err)
	}
	if _, _, err := d.Decode(cut, 8, top, true, out); err == nil {
		t.Fatal("verifying decode of a truncated file succeeded")
	}
}

// TestOddJPEGsDecodeAsPIL: JPEGs less common than 4:2:0 YCbCr decode
// to the very RGB bytes that PIL's convert("RGB") gives (the .rgb files,
// written by PIL 9.4 on Debian), whole and by region: 4-component CMYK
// as PIL writes it and YCCK (4:2:0) as Photoshop does, both
// Adobe-inverted; 4:4:0 (luma sampled twice vertically); 4:2:0 with a
// restart marker after every MCU row.
func TestOddJPEGsDecodeAsPIL(t *testing.T) {
	d := newDecoder(t)
	for _, name := range []string{"cmyk-pil", "ycck", "s440", "restart"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile("testdata/" + name + ".jpg")
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile("testdata/" + name + ".rgb")
			if err != nil {
				t.Fatal(err)
			}
			w, h, err := d.Header(data)
			if err != nil || 3*w*h != len(want) {
				t.Fatalf("header %dx%d %v, reference of %d bytes", w, h, err, len(want))
			}
			got := make([]byte, 3*w*h)
			if _, _, err := d.Decode(data, 8, Region{0, 0, w, h}, true, got); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("pixel (%d,%d): %v, PIL gives %v", i/3%w, i/3/w, got[i/3*3:i/3*3+3], want[i/3*3:i/3*3+3])
			}
			r := Region{X: w / 3, Y: h / 3, W: w / 2, H: h / 2}
			x, width, err := d.Decode(data, 8, r, false, got)
			if err != nil {
				t.Fatal(err)
			}
			for row := 0; row < r.H; row++ {
				g := got[3*(row*width+r.X-x) : 3*(row*width+r.X-x+r.W)]
				ref := want[3*((r.Y+row)*w+r.X) : 3*((r.Y+row)*w+r.X+r.W)]
				if i := firstDiff(g, ref); i >= 0 {
					t.Fatalf("region row %d, byte %d: %d, PIL gives %d", r.Y+row, i, g[i], ref[i])
				}
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// BenchmarkDecode500x375 is a whole photo, half of it, and the region a
// typical random crop decodes.
func BenchmarkDecode500x375(b *testing.B) {
	d, err := NewDecoder()
	if err != nil {
		b.Skip(err)
	}
	defer d.Close()
	data, _ := photo(b, 500, 375)
	out := make([]byte, 3*500*375)
	for _, c := range []struct {
		name string
		num  int
		r    Region
	}{
		{"full", 8, Region{0, 0, 500, 375}},
		{"half", 4, Region{0, 0, 250, 188}},
		{"crop300x250", 8, Region{100, 60, 300, 250}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := d.Decode(data, c.num, c.r, false, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
