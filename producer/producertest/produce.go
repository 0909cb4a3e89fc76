package producertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/source"
)

// Produce runs a producer over cfg and reads every batch as one consumer.
func Produce(t *testing.T, cfg producer.Config) []*batchfile.Batch {
	t.Helper()
	store := batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()*3))
	defer store.Close()
	p, err := producer.New(cfg, store, memfile.NewMemFD())
	if err != nil {
		t.Fatal(err)
	}
	return ProduceWith(t, p, store)
}

// Config is a small producer configuration over src: 12×12 samples, seed 5.
func Config(src source.Source, batch, epochs, workers int) producer.Config {
	return producer.Config{Source: src, BatchSize: batch, ImageSize: 12, Epochs: epochs,
		Workers: workers, Seed: 5, Layout: pipeline.NCHW, Transform: pipeline.Train}
}

// ProduceWith runs p and reads every batch through the store's API.
func ProduceWith(t *testing.T, p *producer.Producer, store *batchstore.Store) []*batchfile.Batch {
	t.Helper()
	if err := store.Join("c"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var out []*batchfile.Batch
	// A producer stalled on a file (a FIFO) fails the test instead of
	// hanging it.
	stalled, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	Drain(t, stalled, store, func(ref batchstore.Ref, l *batchstore.Lease) {
		data := make([]byte, ref.Size)
		if _, err := l.Blob().ReadAt(data, 0); err != nil {
			t.Fatal(err)
		}
		b, err := batchfile.ParseBatch(data)
		if err != nil {
			t.Fatalf("batch %d: %v", ref.Local, err)
		}
		out = append(out, b)
	})
	cancel() // it idles once nobody needs more
	if err := <-done; err != nil {
		t.Fatalf("producer: %v", err)
	}
	return out
}

// Drain reads consumer "c"'s batches in order until the end, calling
// each with every one while it is open.
func Drain(tb testing.TB, ctx context.Context, store *batchstore.Store, each func(batchstore.Ref, *batchstore.Lease)) {
	tb.Helper()
	for i := uint64(0); ; i++ {
		ref, err := store.Lookup(ctx, "c", i, 1)
		if errors.Is(err, batchstore.ErrNotFound) {
			return
		}
		if err != nil {
			tb.Fatalf("lookup %d: %v", i, err)
		}
		l, err := store.Open(ref.Seq, 1)
		if err != nil {
			tb.Fatal(err)
		}
		each(ref, l)
		l.Release()
	}
}

// EqualBatches fails unless x and y hold the same batches, byte for byte.
func EqualBatches(t *testing.T, x, y []*batchfile.Batch, what string) {
	t.Helper()
	if len(x) != len(y) {
		t.Fatalf("%s: %d batches and %d", what, len(x), len(y))
	}
	for i := range x {
		if !bytes.Equal(x[i].Images, y[i].Images) || fmt.Sprint(x[i].Labels, x[i].Indices) != fmt.Sprint(y[i].Labels, y[i].Indices) {
			t.Fatalf("%s: batch %d differs", what, i)
		}
	}
}

// Running is a producer at work over a store of three batches, with
// one consumer "c" joined.
type Running struct {
	Store  *batchstore.Store
	P      *producer.Producer
	Ctx    context.Context
	Cancel context.CancelFunc
	Done   chan error // Run's result
}

// StartProducer runs a producer over cfg for at most timeout; the
// test's end stops it and closes the store.
func StartProducer(t *testing.T, cfg producer.Config, timeout time.Duration) *Running {
	t.Helper()
	store := batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()*3))
	t.Cleanup(func() { store.Close() })
	p, err := producer.New(cfg, store, memfile.NewMemFD())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Join("c"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	r := &Running{Store: store, P: p, Ctx: ctx, Cancel: cancel, Done: make(chan error, 1)}
	go func() { r.Done <- p.Run(ctx) }()
	return r
}

// Read reads consumer "c"'s batches in order until its end or the first
// failed lookup, whose error it returns (the end's ErrNotFound is nil),
// calling after, if set, with each batch read.
func (r *Running) Read(t testing.TB, after func(j uint64, b *batchfile.Batch)) ([]*batchfile.Batch, error) {
	t.Helper()
	var got []*batchfile.Batch
	for j := uint64(0); ; j++ {
		ref, err := r.Store.Lookup(r.Ctx, "c", j, 1)
		if errors.Is(err, batchstore.ErrNotFound) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		l, err := r.Store.Open(ref.Seq, 1)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, ref.Size)
		if _, err := l.Blob().ReadAt(data, 0); err != nil {
			t.Fatal(err)
		}
		l.Release()
		b, err := batchfile.ParseBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b)
		if after != nil {
			after(j, b)
		}
	}
}
