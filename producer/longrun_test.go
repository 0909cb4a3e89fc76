package producer_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer"
)

// running is a producer at work over a store of three batches, with
// one consumer "c" joined.
type running struct {
	store  *batchstore.Store
	p      *producer.Producer
	ctx    context.Context
	cancel context.CancelFunc
	done   chan error // Run's result
}

// startProducer runs a producer over cfg for at most timeout; the
// test's end stops it and closes the store.
func startProducer(t *testing.T, cfg producer.Config, timeout time.Duration) *running {
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
	r := &running{store: store, p: p, ctx: ctx, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	return r
}

// liveHeap is the heap that a full collection leaves: what the process
// keeps, not what it has yet to collect.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestForeverKeepsTheHeapFlat runs --epochs 0 over a one-sample dataset
// (an epoch a batch, the most epochs per second) with one consumer that
// reads everything, and measures the live heap between epoch 1,000 and
// epoch 5,000: state kept per epoch or per batch grows it by hundreds of
// bytes an epoch, which no collection takes back.
func TestForeverKeepsTheHeapFlat(t *testing.T) {
	const warm, measured = 1000, 4000
	cfg := config(producer.NewSynthetic(1, 1), 1, 0, 1)
	cfg.ImageSize = 4
	r := startProducer(t, cfg, 3*time.Minute)
	store, ctx := r.store, r.ctx
	defer func() {
		r.cancel()
		if err := <-r.done; err != nil {
			t.Errorf("producer: %v", err)
		}
	}()
	read := func(j uint64) {
		ref, err := store.Lookup(ctx, "c", j, 1)
		if err != nil {
			t.Fatalf("lookup %d: %v", j, err)
		}
		l, err := store.Open(ref.Seq, 1)
		if err != nil {
			t.Fatalf("open %d: %v", j, err)
		}
		l.Release()
	}
	var j uint64
	for ; j < warm; j++ {
		read(j)
	}
	before := liveHeap()
	for ; j < warm+measured; j++ {
		read(j)
	}
	after := liveHeap()
	perThousand := (int64(after) - int64(before)) * 1000 / measured
	t.Logf("live heap %d -> %d bytes over %d epochs: %+d bytes per 1,000 epochs", before, after, measured, perThousand)
	// A few KiB is the collector's own noise (the test's goroutines, timers);
	// one map entry an epoch is far above it.
	if perThousand > 8<<10 {
		t.Fatalf("the live heap grows by %d bytes per 1,000 epochs", perThousand)
	}
}
