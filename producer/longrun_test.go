package producer_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

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
	cfg := producertest.Config(source.NewSynthetic(1, 1), 1, 0, 1)
	cfg.ImageSize = 4
	r := producertest.StartProducer(t, cfg, 3*time.Minute)
	store, ctx := r.Store, r.Ctx
	defer func() {
		r.Cancel()
		if err := <-r.Done; err != nil {
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
	// Up to some 8 KiB is the collector's own noise (the test's
	// goroutines, timers; 1.9, 3.0 and 8.0 KiB seen in runs under load);
	// one epoch's mark kept an epoch (pruneEpochs undone) is 171 KiB.
	if perThousand > 16<<10 {
		t.Fatalf("the live heap grows by %d bytes per 1,000 epochs", perThousand)
	}
}
