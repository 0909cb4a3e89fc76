package pipeline

import (
	"context"
	"testing"

	"github.com/tsock/tsock/producer/source"
)

// task is one sample for a test worker to make.
type task struct {
	index, epoch int
	buf          []byte
}

// worker is a Maker over a source, as the producer's workers use one.
type worker struct {
	*Maker
	src     source.Source
	scratch []byte
}

// testWorker is a maker of size×size samples (train transform, NCHW,
// seed 0) over src; closed at the end of the test.
func testWorker(tb testing.TB, src source.Source, size int, decoder string) *worker {
	tb.Helper()
	useTurbo, _, err := PickDecoder(decoder)
	if err != nil {
		tb.Skipf("SKIPPED: %v", err)
	}
	m := NewMaker(Config{ImageSize: size, Layout: NCHW, Transform: Train}, useTurbo)
	tb.Cleanup(m.Close)
	return &worker{Maker: m, src: src}
}

// make reads sample t's bytes and makes it into t.buf.
func (w *worker) make(t *task) error {
	data, err := w.src.Encoded(context.Background(), t.index, &w.scratch)
	if err != nil {
		return err
	}
	return w.Make(data, t.epoch, t.index, t.buf)
}
