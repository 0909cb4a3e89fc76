package producer

import (
	"bytes"
	"fmt"
	"math"

	"github.com/tsock/tsock/producer/turbo"
)

// EncodedSource is a source whose samples are encoded files: the producer
// reads the header first, so that it can decode only as much as the crop
// needs.
type EncodedSource interface {
	Source
	// Encoded returns sample i's file, read into the worker's scratch.
	Encoded(i int, scratch *[]byte) ([]byte, error)
}

// Decoders a user can ask for with --decoder.
const (
	DecoderAuto  = "auto"  // libjpeg-turbo if installed, else Go
	DecoderTurbo = "turbo" // libjpeg-turbo or fail
	DecoderGo    = "go"    // Go's image/jpeg: slower, no DCT scaling
)

// pickDecoder resolves --decoder: whether to use libjpeg-turbo, and the
// line status shows.
func pickDecoder(want string) (useTurbo bool, describe string, err error) {
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

// worker is one decoding goroutine's reusable state.
type worker struct {
	p       *Producer
	img     RGB
	scratch []byte
	rs      *resampler
	tj      *turbo.Decoder // nil: Go decoders only
}

func (p *Producer) newWorker() *worker {
	w := &worker{p: p, rs: newResampler(p.cfg.ImageSize, p.cfg.Layout)}
	if p.useTurbo {
		w.tj, _ = turbo.NewDecoder() // nil on failure: the Go path still works
	}
	return w
}

func (w *worker) close() {
	if w.tj != nil {
		w.tj.Close()
	}
}

var jpegMagic = []byte{0xff, 0xd8, 0xff}

// make makes sample t into t.buf: from what was kept of it (a
// deterministic transform's first making), else by decoding it.
func (w *worker) make(t *task) error {
	k := w.p.kept
	if k != nil && k.get(t.index, t.buf) {
		return nil
	}
	if err := w.decode(t); err != nil {
		return err
	}
	if k != nil {
		k.keep(t.index, t.buf)
	}
	return nil
}

// decode decodes, crops, resizes and flips sample t into t.buf.
func (w *worker) decode(t *task) error {
	defer w.trim()
	cfg := w.p.cfg
	enc, ok := cfg.Source.(EncodedSource)
	if !ok {
		if err := cfg.Source.Load(t.index, &w.img, &w.scratch); err != nil {
			return err
		}
		return w.rs.resize(&w.img, cropFor(cfg.Transform, cfg.Seed, t.epoch, t.index, w.img.W, w.img.H, cfg.ImageSize), t.buf)
	}
	if w.p.fetch != nil {
		enc = w.p.fetch
	}
	data, err := enc.Encoded(t.index, &w.scratch)
	if err != nil {
		return err
	}
	if w.tj != nil && bytes.HasPrefix(data, jpegMagic) {
		return w.makeRegion(t, data)
	}
	if err := decodeImage(data, &w.img); err != nil {
		return err
	}
	return w.rs.resize(&w.img, cropFor(cfg.Transform, cfg.Seed, t.epoch, t.index, w.img.W, w.img.H, cfg.ImageSize), t.buf)
}

// trim gives back buffers a rare large sample grew (see keepBytes).
func (w *worker) trim() {
	w.img.trim()
	if cap(w.scratch) > keepBytes {
		w.scratch = nil
	}
}

// makeRegion decodes only the crop of a JPEG, at the smallest 1/8 step
// that still leaves it at least S pixels on each side, then resizes it.
// A sample's first decode (producer epoch 0, where every sample is met)
// reads the whole file, so a damaged file is found then and left out of
// every later epoch, never found half-way through the run.
func (w *worker) makeRegion(t *task, data []byte) error {
	cfg := w.p.cfg
	fw, fh, err := w.tj.Header(data)
	if err != nil {
		return err
	}
	if fw <= 0 || fh <= 0 || int64(fw)*int64(fh) > MaxPixels {
		return fmt.Errorf("jpeg of %dx%d pixels: outside 1..%d pixels", fw, fh, MaxPixels)
	}
	c := cropFor(cfg.Transform, cfg.Seed, t.epoch, t.index, fw, fh, cfg.ImageSize)
	num := decodeScale(cfg.Transform, cfg.ImageSize, c)
	sw := turbo.Scaled(fw, num)
	sc := scaleCrop(c, num, sw, turbo.Scaled(fh, num))
	x0, y0, x1, y1, err := w.rs.plan(sc)
	if err != nil {
		return err
	}
	w.img.reset(sw, y1-y0) // room for the widest the decoder may give
	x, width, err := w.tj.Decode(data, num, turbo.Region{X: x0, Y: y0, W: x1 - x0, H: y1 - y0}, t.epoch == 0, w.img.Pix)
	if err != nil {
		return err
	}
	w.img.reset(width, y1-y0)
	return w.rs.apply(&w.img, x, y0, sc.Flip, t.buf)
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
