package ingest

// A batch being written into ingest/: charged to the buffer as it comes,
// then published or refused at its close.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer/skipbudget"
)

// Writer is one batch being written. Its bytes arrive through the
// daemon (WriteAt, Truncate), so that each write is charged to the
// buffer as it comes and none lands after the writer's close has
// published or refused the batch.
type Writer struct {
	in    *Ingest
	seq   uint64
	since time.Time
	res   *batchstore.Reservation

	// mu orders writes (shared) against the close (exclusive): a write
	// either lands before the verdict or fails with ErrFinal.
	mu   sync.RWMutex
	file *memfile.File // nil once the store has it, or once dropped
	done bool          // published or refused: later flushes do nothing
	size atomic.Int64  // the batch's length so far, for status
	// tooLarge: a write was refused for the buffer (EFBIG), so the batch
	// lacks bytes its writer meant it to have: its close refuses it for
	// that, not for what the parser makes of what is left.
	tooLarge atomic.Pointer[error]
}

// Create starts batch seq, which must be the next one: it waits for
// room in the buffer for a batch as large as the largest so far.
func (in *Ingest) Create(ctx context.Context, seq uint64) (*Writer, error) {
	in.mu.Lock()
	switch {
	case seq < in.next:
		in.mu.Unlock()
		return nil, fmt.Errorf("batch %06d: %w (the next is %06d)", seq, batchstore.ErrPublished, in.next)
	case seq > in.next:
		in.mu.Unlock()
		return nil, fmt.Errorf("batch %06d: %w: the next is %06d (read ingest/next)", seq, batchstore.ErrBadBatch, in.next)
	case in.writer != nil:
		in.mu.Unlock()
		return nil, fmt.Errorf("batch %06d: %w", seq, batchstore.ErrWriting)
	}
	w := &Writer{in: in, seq: seq, since: time.Now()}
	in.writer = w // claimed while waiting for room
	estimate := in.largest
	in.mu.Unlock()
	err := w.start(ctx, estimate)
	if err != nil {
		in.mu.Lock()
		in.writer = nil
		in.mu.Unlock()
		return nil, err
	}
	return w, nil
}

func (w *Writer) start(ctx context.Context, estimate int64) error {
	res, err := w.in.store.Reserve(ctx, estimate)
	if err != nil {
		return fmt.Errorf("batch %06d: wait for room: %w", w.seq, err)
	}
	f, err := w.in.alloc.CreateEmpty()
	if err != nil {
		res.Cancel()
		return fmt.Errorf("batch %06d: %w", w.seq, err)
	}
	w.res, w.file = res, f
	return nil
}

// Name is the batch's file name.
func (w *Writer) Name() string { return fmt.Sprintf("%06d.safetensors", w.seq) }

// WriteAt writes p at off. The batch's room in the buffer grows with it,
// waiting while the buffer is full as a create does; a write that would
// take it past the whole buffer fails with ErrTooLarge (EFBIG), one after
// the verdict with ErrFinal.
func (w *Writer) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if err := w.room(ctx, off, int64(len(p))); err != nil {
		return 0, err
	}
	n, err := w.file.WriteAt(p, off)
	w.grew(off + int64(n))
	return n, err
}

// Truncate sets the batch's length (open with O_TRUNC, ftruncate), with
// WriteAt's bounds.
func (w *Writer) Truncate(ctx context.Context, n int64) error {
	w.mu.Lock() // a length set between two writes' checks would escape them
	defer w.mu.Unlock()
	if err := w.room(ctx, 0, n); err != nil {
		return err
	}
	if err := w.file.SetSize(n); err != nil {
		return err
	}
	w.size.Store(n)
	return nil
}

// room checks that n bytes at off may be written, growing the
// reservation to hold them. Callers hold w.mu.
func (w *Writer) room(ctx context.Context, off, n int64) error {
	if w.done || w.file == nil {
		return fmt.Errorf("batch %06d: %w", w.seq, batchstore.ErrFinal)
	}
	limit := w.in.store.Limit()
	if off < 0 || n < 0 || off > limit || n > limit-off {
		err := fmt.Errorf("batch %06d: %d bytes at %d: %w (--buffer is %d)", w.seq, n, off, batchstore.ErrTooLarge, limit)
		w.refuseTooLarge(err)
		return err
	}
	if err := w.res.Grow(ctx, off+n); err != nil {
		err = fmt.Errorf("batch %06d: wait for room for %d bytes: %w", w.seq, off+n, err)
		if errors.Is(err, batchstore.ErrTooLarge) {
			w.refuseTooLarge(err)
		}
		return err
	}
	return nil
}

// refuseTooLarge refuses the batch at its first write past the buffer,
// counted and said at once (ingest/status, ingest/refusal): a batch whose
// first write failed so is empty at its close, which rules nothing.
// Callers hold w.mu (shared).
func (w *Writer) refuseTooLarge(err error) {
	if !w.tooLarge.CompareAndSwap(nil, &err) {
		return
	}
	w.in.mu.Lock()
	defer w.in.mu.Unlock()
	w.in.refused(w.seq, err)
}

// refused counts a refusal of batch seq. Callers hold in.mu.
func (in *Ingest) refused(seq uint64, err error) {
	in.stats.Refused++
	in.stats.LastRefusal = fmt.Sprintf("%06d: %s", seq, strings.TrimPrefix(err.Error(), fmt.Sprintf("batch %06d: ", seq)))
}

// grew notes that the batch is at least end bytes long.
func (w *Writer) grew(end int64) {
	for {
		cur := w.size.Load()
		if end <= cur || w.size.CompareAndSwap(cur, end) {
			return
		}
	}
}

// Size is the batch's length so far.
func (w *Writer) Size() int64 { return w.size.Load() }

// ReadAt lets the writer read back what it wrote (cp may).
func (w *Writer) ReadAt(p []byte, off int64) (int, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.file == nil {
		return 0, fmt.Errorf("batch %06d: %w", w.seq, batchstore.ErrFinal)
	}
	return w.file.ReadAt(p, off)
}

// Close is the writer's own close: the batch is validated and published,
// or refused with the error its close returns. An empty batch is neither
// (a shell opens and closes before a child writes); Release then decides.
// Once ruled, later closes and writes change nothing.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || w.file == nil {
		return nil
	}
	size, err := w.file.Stat()
	if err != nil || size == 0 {
		return err
	}
	// Any failure, an interrupted wait for room included, refuses the
	// batch: its number can be written again.
	tooLarge := w.tooLarge.Load()
	if tooLarge != nil {
		err = *tooLarge
	} else {
		err = w.publish(ctx, size)
	}
	in := w.in
	in.mu.Lock()
	defer in.mu.Unlock()
	w.done = true
	if in.writer == w { // the next batch may be created before our release arrives
		in.writer = nil
	}
	in.stats.LastWrite = time.Now()
	if err != nil && tooLarge == nil { // a write past the buffer was counted then
		in.refused(w.seq, err)
	}
	return err
}

// Finished reports whether the batch was published or refused: either
// way this writer is done with its number.
func (w *Writer) Finished() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.done
}

// Release ends the writer (the kernel's release, once every descriptor
// and mapping of it is gone). A batch its writer's close left unruled
// (empty then, written later by a process it handed the descriptor to) is
// ruled now, the verdict going to ingest/status alone; an unpublished
// batch is dropped and its number can be written again.
func (w *Writer) Release(ctx context.Context) {
	if err := w.Close(ctx); err != nil {
		slog.Info("ingested batch refused at its release", "batch", w.Name(), "err", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	in := w.in
	in.mu.Lock()
	if in.writer == w {
		in.writer = nil
	}
	in.mu.Unlock()
	w.res.Cancel() // a no-op once published
	if w.file != nil {
		w.file.Free()
		w.file = nil
	}
	w.done = true
}

// publish validates the batch of size bytes and hands it to the store.
func (w *Writer) publish(ctx context.Context, size int64) error {
	in := w.in
	h, err := batchfile.Parse(w.file, size)
	if err != nil {
		return fmt.Errorf("%w: %v", batchstore.ErrBadBatch, err)
	}
	indices, err := readIndices(w.file, h)
	if err != nil {
		return err
	}
	in.mu.Lock()
	info, commit, err := in.place(h, indices)
	in.mu.Unlock()
	if errors.Is(err, skipbudget.ErrExceeded) {
		// The batch is good, the run is over: EIO, not EINVAL.
		return fmt.Errorf("%w: %w", batchstore.ErrProducerFailed, err)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", batchstore.ErrBadBatch, err)
	}
	meta := in.metadata(h, info, w.seq)
	if err := relayout(w.file, h, meta); err != nil {
		return err
	}
	if err := w.reserveExactly(ctx, h.Size()); err != nil {
		return err
	}
	blob, err := in.upload(ctx, w.file, h)
	if err != nil {
		return err
	}
	if _, err := w.res.Publish(blob, info); err != nil {
		blob.Free() // the slab too
		w.file = nil
		return err
	}
	w.file = nil // the store's now
	in.mu.Lock()
	defer in.mu.Unlock()
	commit()
	in.next++
	in.largest = max(in.largest, h.Size())
	if in.schema == nil {
		in.schema = h
	}
	in.stats.Published++
	in.stats.PublishedBytes += h.Size()
	return nil
}

// reserveExactly makes the reservation the batch's real size, waiting
// for room if it grew: the bytes are written already, so the buffer may
// be over by this one batch until others are read.
func (w *Writer) reserveExactly(ctx context.Context, size int64) error {
	if err := w.res.Grow(ctx, size); err != nil {
		return fmt.Errorf("wait for room for %d bytes: %w", size, err)
	}
	return nil
}
