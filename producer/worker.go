package producer

import (
	"context"

	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/source"
)

// worker is one making goroutine's reusable state.
type worker struct {
	p       *Producer
	maker   *pipeline.Maker
	scratch []byte // the encoded bytes of the sample being made
	// versions tells a sample's version where it matters: where it may
	// be served from a copy, or tried again once its file changes (a
	// stat, beside a decode). nil otherwise.
	versions source.Versioned
}

func (p *Producer) newWorker() *worker {
	w := &worker{p: p, maker: pipeline.NewMaker(p.cfg.pipeline(), p.useTurbo)}
	if v, ok := source.As[source.Versioned](p.cfg.Source); ok && (p.kept != nil || p.cfg.Rescan) {
		w.versions = v
	}
	return w
}

func (w *worker) close() { w.maker.Close() }

// make makes sample t into t.buf: from what was kept of it (a
// deterministic transform's first making) while its file is the one it
// was made from, else from its bytes.
func (w *worker) make(ctx context.Context, t *task) error {
	if w.versions != nil {
		var err error
		if t.version, err = w.versions.Version(t.index); err != nil {
			w.p.fetch.drop(t.index)
			return err // gone: skipped and counted, never served from a copy
		}
	}
	k := w.p.kept
	if k != nil && k.get(t.index, t.version, t.buf) {
		w.p.fetch.drop(t.index) // asked ahead before its first making was kept
		return nil
	}
	if err := w.decode(ctx, t); err != nil {
		return err
	}
	if k != nil {
		k.keep(t.index, t.version, t.buf)
	}
	return nil
}

// decode reads sample t's bytes (from the fetcher if one reads ahead)
// and has the pipeline make it into t.buf.
func (w *worker) decode(ctx context.Context, t *task) error {
	defer w.trim()
	var src interface {
		Encoded(context.Context, int, *[]byte) ([]byte, error)
	} = w.p.cfg.Source
	if w.p.fetch != nil {
		src = w.p.fetch
	}
	data, err := src.Encoded(ctx, t.index, &w.scratch)
	if err != nil {
		return err
	}
	return w.maker.Make(data, t.epoch, t.index, t.buf)
}

// keepScratch is the largest encoded buffer a worker keeps between
// samples, as large as the pipeline's pixel buffers (a 4096² photo): one
// huge file, met once, is not held for the rest of the run.
const keepScratch = 3 * 4096 * 4096

// trim gives back an encoded buffer a rare large sample grew.
func (w *worker) trim() {
	if cap(w.scratch) > keepScratch {
		w.scratch = nil
	}
}
