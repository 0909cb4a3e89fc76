package ingest_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer/ingest"
	"github.com/tsock/tsock/producer/skipbudget"
)

// The ingest side without FUSE: a store in memfds, batches written through
// the Writer as the file system's ingest/ does, read back through the
// store's own API.

type rig struct {
	store *batchstore.Store
	in    *ingest.Ingest
}

// newRig is an ingest of samples (0: unordered) over a store of limit
// bytes, with consumer "c" joined.
func newRig(t *testing.T, samples int, limit int64) *rig {
	t.Helper()
	store := batchstore.New(batchstore.Config{Limit: limit, BatchSize: 4, Epochs: 1, Samples: samples,
		Measure: batchfile.Measure, Unordered: samples == 0})
	t.Cleanup(func() { store.Close() })
	if err := store.Join("c"); err != nil {
		t.Fatal(err)
	}
	return &rig{store: store, in: ingest.New(ingest.Config{Samples: samples, MaxSamples: 1 << 20}, store, memfile.NewMemFD())}
}

// batch is a batch of dataset indices idx: x holds each index.
func batch(t *testing.T, meta map[string]string, idx ...int64) []byte {
	t.Helper()
	data, err := batchfile.Build(meta, []batchfile.TensorData{
		{Name: "x", Dtype: "I64", Shape: []int64{int64(len(idx))}, Data: batchfile.Int64s(idx...)},
		{Name: "indices", Dtype: "I64", Shape: []int64{int64(len(idx))}, Data: batchfile.Int64s(idx...)},
	}, batchfile.PageSize)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// write writes data as batch seq in pieces, as the kernel hands writes
// over, and closes it: the close's verdict.
func (r *rig) write(t *testing.T, seq uint64, data []byte) error {
	t.Helper()
	ctx := context.Background()
	w, err := r.in.Create(ctx, seq)
	if err != nil {
		return err
	}
	defer w.Release(ctx)
	for off := 0; off < len(data); off += 1000 {
		if _, err := w.WriteAt(ctx, data[off:min(off+1000, len(data))], int64(off)); err != nil {
			w.Close(ctx)
			return err
		}
	}
	return w.Close(ctx)
}

// read is consumer c's batch local, its x values.
func (r *rig) read(t *testing.T, local uint64) []int64 {
	t.Helper()
	ref, err := r.store.Lookup(context.Background(), "c", local, 1)
	if err != nil {
		t.Fatalf("batch %d: %v", local, err)
	}
	l, err := r.store.Open(ref.Seq, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	data := make([]byte, ref.Size)
	if _, err := l.Blob().ReadAt(data, 0); err != nil {
		t.Fatal(err)
	}
	h, err := batchfile.ParseBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	x := h.Tensor("x")
	var out []int64
	for at := h.DataStart + x.Begin; at < h.DataStart+x.End; at += 8 {
		out = append(out, int64(binary.LittleEndian.Uint64(data[at:])))
	}
	return out
}

func TestUnorderedBatchesArePublishedInOrder(t *testing.T) {
	r := newRig(t, 0, 1<<20)
	for seq, idx := range [][]int64{{1, 2, 3, 4}, {5, 6}} {
		meta := map[string]string{}
		if seq == 1 {
			meta["last"] = "true"
		}
		if err := r.write(t, uint64(seq), batch(t, meta, idx...)); err != nil {
			t.Fatalf("batch %d: %v", seq, err)
		}
	}
	if got := r.in.Next(); got != 2 {
		t.Fatalf("next is %d after two batches", got)
	}
	if x := r.read(t, 0); len(x) != 4 || x[0] != 1 {
		t.Fatalf("batch 0 holds %v", x)
	}
	if x := r.read(t, 1); len(x) != 2 || x[1] != 6 {
		t.Fatalf("batch 1 holds %v", x)
	}
	if st := r.in.Snapshot(); st.Published != 2 || st.Refused != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A malformed batch is refused at its close, counted, said in one line,
// and its number can be written again; a batch out of turn or a second
// writer is refused at its create.
func TestBadBatchesAreRefusedAndLoseNothing(t *testing.T) {
	r := newRig(t, 0, 1<<20)
	good := batch(t, nil, 1, 2)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"not safetensors", []byte("hello, world"), "header"},
		{"truncated", good[:len(good)-3], ""},
	} {
		err := r.write(t, 0, tc.data)
		if !errors.Is(err, batchstore.ErrBadBatch) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a bad batch naming %q", tc.name, err, tc.want)
		}
		st := r.in.Snapshot()
		if !strings.HasPrefix(st.LastRefusal, "000000: ") || strings.Contains(st.LastRefusal, "\n") {
			t.Errorf("%s: last refusal %q", tc.name, st.LastRefusal)
		}
		if r.in.Next() != 0 {
			t.Fatalf("%s: a refused batch moved next to %d", tc.name, r.in.Next())
		}
	}
	if _, err := r.in.Create(context.Background(), 5); !errors.Is(err, batchstore.ErrBadBatch) {
		t.Fatalf("batch 5 before 0: %v", err)
	}
	w, err := r.in.Create(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.in.Create(context.Background(), 0); !errors.Is(err, batchstore.ErrWriting) {
		t.Fatalf("a second writer of batch 0: %v", err)
	}
	w.Release(context.Background())
	if err := r.write(t, 0, good); err != nil {
		t.Fatalf("batch 0 written again after its refusals: %v", err)
	}
	if st := r.in.Snapshot(); st.Refused != 2 || st.Published != 1 {
		t.Fatalf("stats %+v: want 2 refused, 1 published", st)
	}
}

// A write that would take a batch past the whole buffer fails with
// ErrTooLarge and refuses the batch then, even where nothing was written
// (an empty batch's close rules nothing); a write after the verdict fails
// with ErrFinal and changes nothing.
func TestAWritePastTheBufferRefusesTheBatch(t *testing.T) {
	r := newRig(t, 0, 64<<10)
	ctx := context.Background()
	w, err := r.in.Create(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(ctx, make([]byte, 70<<10), 0); !errors.Is(err, batchstore.ErrTooLarge) {
		t.Fatalf("70 KiB into a 64 KiB buffer: %v", err)
	}
	if st := r.in.Snapshot(); st.Refused != 1 || !strings.Contains(st.LastRefusal, "larger than the buffer") {
		t.Fatalf("after the write: %+v", st)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatalf("close of the empty batch: %v", err)
	}
	w.Release(ctx)
	good := batch(t, nil, 1)
	w, err = r.in.Create(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(ctx, good, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteAt(ctx, make([]byte, 70<<10), int64(len(good))); !errors.Is(err, batchstore.ErrTooLarge) {
		t.Fatalf("a write past the buffer after a good one: %v", err)
	}
	if err := w.Close(ctx); !errors.Is(err, batchstore.ErrTooLarge) {
		t.Fatalf("the close of a batch a write was refused for: %v, want it refused for that", err)
	}
	if _, err := w.WriteAt(ctx, good, 0); !errors.Is(err, batchstore.ErrFinal) {
		t.Fatalf("a write after the verdict: %v", err)
	}
	w.Release(ctx)
	if st := r.in.Snapshot(); st.Refused != 2 || st.Published != 0 || r.in.Next() != 0 {
		t.Fatalf("stats %+v, next %d: want 2 refused, none published", st, r.in.Next())
	}
}

// Ordered mode: ingest/order hands out the epoch's indices; a batch must
// carry them in order; skipped samples leave the epoch exact over the rest.
func TestOrderedEpochsAreExact(t *testing.T) {
	r := newRig(t, 6, 1<<20)
	ctx := context.Background()
	text, err := r.in.Order(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(text))
	if len(lines) != 4+6 || lines[0] != "0" || lines[1] != "0" || lines[2] != "6" || lines[3] != "6" {
		t.Fatalf("order: %q", text)
	}
	var order []int64
	for _, s := range lines[4:] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("order: %q", text)
		}
		order = append(order, v)
	}
	if err := r.write(t, 0, batch(t, nil, order[1], order[0])); !errors.Is(err, batchstore.ErrBadBatch) {
		t.Fatalf("indices out of order: %v", err)
	}
	if err := r.in.Skip(strconv.FormatInt(order[0], 10)); err != nil {
		t.Fatal(err)
	}
	if err := r.write(t, 0, batch(t, nil, order[1:5]...)); err != nil {
		t.Fatal(err)
	}
	if err := r.write(t, 1, batch(t, nil, order[5])); err != nil {
		t.Fatal(err)
	}
	got := append(r.read(t, 0), r.read(t, 1)...)
	if len(got) != 5 {
		t.Fatalf("epoch of %v: want the 5 samples not skipped", got)
	}
	for i, v := range got {
		if v != order[i+1] {
			t.Fatalf("epoch %v, want %v", got, order[1:])
		}
	}
	if st := r.in.Snapshot(); st.Skipped != 1 {
		t.Fatalf("skipped %d, want 1", st.Skipped)
	}
	if err := r.in.Grow("5"); !errors.Is(err, batchstore.ErrBadBatch) {
		t.Fatalf("a dataset that shrinks: %v", err)
	}
}

// The samples a batch passes over in ordered mode (how a client skips a
// bad sample) count against --max-skipped as Skip's do: a run whose
// producer drops a fifth of the data fails, readers get the failure.
func TestOrderedGapsCountAgainstTheSkipBudget(t *testing.T) {
	store := batchstore.New(batchstore.Config{Limit: 1 << 20, BatchSize: 4, Epochs: 1, Samples: 10, Measure: batchfile.Measure})
	t.Cleanup(func() { store.Close() })
	if err := store.Join("c"); err != nil {
		t.Fatal(err)
	}
	budget, err := skipbudget.Parse("10%") // 1 of 10
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{store: store, in: ingest.New(ingest.Config{Samples: 10, MaxSamples: 1 << 20, MaxSkipped: budget}, store, memfile.NewMemFD())}
	text, err := r.in.Order(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var order []int64
	for _, s := range strings.Fields(string(text))[4:] {
		v, _ := strconv.ParseInt(s, 10, 64)
		order = append(order, v)
	}
	// One gap: within the budget.
	if err := r.write(t, 0, batch(t, nil, order[1], order[2])); err != nil {
		t.Fatal(err)
	}
	// A second: one past it. The batch is refused and the run fails.
	err = r.write(t, 1, batch(t, nil, order[4], order[5]))
	if !errors.Is(err, skipbudget.ErrExceeded) {
		t.Fatalf("a batch past the budget's gaps: %v, want ErrSkipBudget", err)
	}
	if st := r.in.Snapshot(); st.Skipped != 1 || st.Published != 1 {
		t.Fatalf("stats %+v: want 1 skipped, 1 published", st)
	}
	if _, err := store.Lookup(context.Background(), "c", 1, 1); !errors.Is(err, skipbudget.ErrExceeded) {
		t.Fatalf("a reader after the run failed: %v, want the skip budget's failure", err)
	}
}
