package pipeline

import (
	"bytes"
	"fmt"
	"math"

	"github.com/tsock/tsock/producer/pipeline/internal/turbo"
)

// Config is how samples are made.
type Config struct {
	ImageSize int // S: samples are S×S
	Layout    Layout
	Transform Transform
	Seed      uint64 // with (epoch, index), a sample's crop and flip
}

// Decoders a user can ask for with --decoder.
const (
	DecoderAuto  = "auto"  // libjpeg-turbo if installed, else Go
	DecoderTurbo = "turbo" // libjpeg-turbo or fail
	DecoderGo    = "go"    // Go's image/jpeg: slower, no DCT scaling
)

// TurboAvailable says why libjpeg-turbo cannot be used here, or nil:
// what `tsock version` reports.
func TurboAvailable() error { return turbo.Available() }

// PickDecoder resolves --decoder: whether to use libjpeg-turbo, and the
// line status shows.
func PickDecoder(want string) (useTurbo bool, describe string, err error) {
	switch want {
	case DecoderGo:
		return false, "Go image/jpeg (by request)", nil
	case DecoderTurbo, DecoderAuto, "":
		if err := turbo.Available(); err != nil {
			if want == DecoderTurbo {
				return false, "", fmt.Errorf("--decoder turbo: %w", err)
			}
			return false, "Go image/jpeg, 3x slower: " + err.Error(), nil
		}
		return true, "libjpeg-turbo (dlopen libjpeg.so.62): decodes only the crop, DCT-domain scaling", nil
	}
	return false, "", fmt.Errorf("decoder %q: want auto, turbo or go", want)
}

// Maker is one worker's reusable state: it turns a sample's encoded bytes
// into its S×S pixels. Not safe for concurrent use: a worker each.
type Maker struct {
	cfg Config
	img RGB
	rs  *resampler
	tj  *turbo.Decoder // nil: Go decoders only
}

// NewMaker returns a maker; with useTurbo, JPEGs go through libjpeg-turbo
// (the Go decoders if it cannot start). Close frees its decoder.
func NewMaker(cfg Config, useTurbo bool) *Maker {
	m := &Maker{cfg: cfg, rs: newResampler(cfg.ImageSize, cfg.Layout)}
	if useTurbo {
		m.tj, _ = turbo.NewDecoder() // nil on failure: the Go path still works
	}
	return m
}

// Close frees the maker's decoder.
func (m *Maker) Close() {
	if m.tj != nil {
		m.tj.Close()
	}
}

var jpegMagic = []byte{0xff, 0xd8, 0xff}

// Make decodes, crops, resizes and flips sample index's encoded bytes for
// epoch into dst (3·S·S bytes). Epoch 0 verifies a JPEG whole (see
// makeRegion).
func (m *Maker) Make(data []byte, epoch, index int, dst []byte) error {
	defer m.img.trim()
	if m.tj != nil && bytes.HasPrefix(data, jpegMagic) {
		return m.makeRegion(data, epoch, index, dst)
	}
	if err := decodeImage(data, &m.img); err != nil {
		return err
	}
	cfg := m.cfg
	return m.rs.resize(&m.img, cropFor(cfg.Transform, cfg.Seed, epoch, index, m.img.W, m.img.H, cfg.ImageSize), dst)
}

// makeRegion decodes only the crop of a JPEG, at the smallest 1/8 step
// that still leaves it at least S pixels on each side, then resizes it.
// A sample's first decode (producer epoch 0, where every sample is met)
// reads the whole file, so a damaged file is found then and left out of
// every later epoch, never found half-way through the run.
func (m *Maker) makeRegion(data []byte, epoch, index int, dst []byte) error {
	cfg := m.cfg
	fw, fh, err := m.tj.Header(data)
	if err != nil {
		return err
	}
	if fw <= 0 || fh <= 0 || int64(fw)*int64(fh) > MaxPixels {
		return fmt.Errorf("jpeg of %dx%d pixels: outside 1..%d pixels", fw, fh, MaxPixels)
	}
	c := cropFor(cfg.Transform, cfg.Seed, epoch, index, fw, fh, cfg.ImageSize)
	num := decodeScale(cfg.Transform, cfg.ImageSize, c)
	sw := turbo.Scaled(fw, num)
	sc := scaleCrop(c, num, sw, turbo.Scaled(fh, num))
	x0, y0, x1, y1, err := m.rs.sourceRect(sc)
	if err != nil {
		return err
	}
	m.img.reset(sw, y1-y0) // room for the widest the decoder may give
	x, width, err := m.tj.Decode(data, num, turbo.Region{X: x0, Y: y0, W: x1 - x0, H: y1 - y0}, epoch == 0, m.img.Pix)
	if err != nil {
		return err
	}
	m.img.reset(width, y1-y0)
	return m.rs.apply(&m.img, x, y0, sc.Flip, dst)
}

// evalDecodeFactor: the eval transform decodes at no less than twice
// the sample's size, leaving most of the reduction to the antialiased
// resize that torchvision's Resize does. The DCT-domain scale is another
// filter: at 1x, real photos came out a mean 2.8 levels from torchvision's
// pixels at p99; at 2x, 0.2 (scripts/python/compare_eval.py). Training
// crops keep the fastest scale: they are random anyway.
const evalDecodeFactor = 2

// decodeScale is the num/8 at which crop c is decoded for samples of
// size×size.
func decodeScale(t Transform, size int, c Crop) int {
	if t == Eval {
		size *= evalDecodeFactor
	}
	return scaleFor(c, size)
}

// scaleFor is the smallest num in 1, 2, 4, 8 for which the crop's box
// decoded at num/8 is still at least size pixels wide and high. The
// other scales' IDCTs (3x3, 5x5 to 7x7, and their doubles for subsampled
// chroma) are plain C in libjpeg-turbo, the powers of two SIMD: decoding
// more pixels with them is faster (BenchmarkSample on real photos: 1066,
// 1077, 1115 images/s with every scale, 1165, 1200, 1224 with these).
func scaleFor(c Crop, size int) int {
	b := c.box()
	least := max(8*float64(size)/b.W, 8*float64(size)/b.H) - 1e-9
	num := 1
	for num < 8 && float64(num) < least {
		num *= 2
	}
	return num
}

// scaleCrop maps a full-size crop onto the image decoded at num/8 (w×h):
// full-size pixel edge u is u·num/8 there, as each 8×8 block becomes
// num×num. The rectangle grows to whole pixels; the box stays exact.
func scaleCrop(c Crop, num, w, h int) Crop {
	f := float64(num) / 8
	b := c.box()
	x0, y0 := int(math.Floor(float64(c.X)*f)), int(math.Floor(float64(c.Y)*f))
	x1, y1 := min(int(math.Ceil(float64(c.X+c.W)*f)), w), min(int(math.Ceil(float64(c.Y+c.H)*f)), h)
	return Crop{X: x0, Y: y0, W: max(1, x1-x0), H: max(1, y1-y0), Box: Box{b.X * f, b.Y * f, b.W * f, b.H * f}, Flip: c.Flip}
}
