package producer

import (
	"bytes"
	"fmt"

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

// make decodes, crops, resizes and flips sample t into t.buf.
func (w *worker) make(t *task) error {
	defer w.trim()
	cfg := w.p.cfg
	enc, ok := cfg.Source.(EncodedSource)
	if !ok {
		if err := cfg.Source.Load(t.index, &w.img, &w.scratch); err != nil {
			return err
		}
		return w.rs.resize(&w.img, cropFor(cfg.Transform, cfg.Seed, t.epoch, t.index, w.img.W, w.img.H), t.buf)
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
	return w.rs.resize(&w.img, cropFor(cfg.Transform, cfg.Seed, t.epoch, t.index, w.img.W, w.img.H), t.buf)
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
	c := cropFor(cfg.Transform, cfg.Seed, t.epoch, t.index, fw, fh)
	num := scaleFor(c, cfg.ImageSize)
	sw := turbo.Scaled(fw, num)
	sc := scaleCrop(c, num, sw, turbo.Scaled(fh, num))
	w.img.reset(sw, sc.H) // room for the widest the decoder may give
	x, width, err := w.tj.Decode(data, num, turbo.Region{X: sc.X, Y: sc.Y, W: sc.W, H: sc.H}, t.epoch == 0, w.img.Pix)
	if err != nil {
		return err
	}
	w.img.reset(width, sc.H)
	sc.X, sc.Y = sc.X-x, 0
	return w.rs.resize(&w.img, sc, t.buf)
}

// scaleFor is the smallest num in 1..8 for which the crop decoded at num/8
// is still at least size pixels wide and high.
func scaleFor(c Crop, size int) int {
	num := max(ceilDiv(8*size, c.W), ceilDiv(8*size, c.H))
	return min(max(num, 1), 8)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// scaleCrop maps a full-size crop onto the image decoded at num/8.
func scaleCrop(c Crop, num, w, h int) Crop {
	x, y := c.X*num/8, c.Y*num/8
	cw := min(max(1, (c.W*num+4)/8), w-x)
	ch := min(max(1, (c.H*num+4)/8), h-y)
	return Crop{X: x, Y: y, W: cw, H: ch, Flip: c.Flip}
}
