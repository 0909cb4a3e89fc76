//go:build !race

// Tests whose verdict is a statistic or a memory figure: the race
// detector changes what allocations cost and slows them several times,
// and watches nothing they run that the race-built tests do not run too.
// scripts/test.sh runs them in a plain build beside go test -race (the
// files with this build line are its list).

package producer_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// TestSubsetOrdersAreUniform: a consumer on a subset sees each epoch of
// it in a uniform shuffle, whether it joined at an epoch's start or in
// the middle of one (its epochs stitched across two producer epochs):
// over 200 epochs of a 16-sample subset, how often each sample falls in
// each quarter of its epoch passes a chi-square test (48 degrees of
// freedom; 84.0 is the 0.1% point). The seeds are fixed: the test is
// deterministic, and an order that is not uniform (no shuffle, or one
// that favours a piece) fails it.
func TestSubsetOrdersAreUniform(t *testing.T) {
	const n, epochs, size = 40, 200, 16
	cfg := producertest.Config(source.NewSynthetic(n, 4), 4, epochs, 1)
	cfg.ImageSize = 2
	r := newRig(t, cfg, 40)
	sub := subsetOf(t, "sixteen", n, func(i int) bool { return i%5 == 1 || i%5 == 3 })
	r.join("all", 0, nil)
	r.join("aligned", 0, sub)
	r.run()
	r.read("aligned", 4, nil)
	r.read("all", 4, func(j int) {
		if j == 4 { // mid-epoch 0 of the producer: its first epoch is stitched
			r.join("late", 0, sub)
			r.read("late", 4, nil)
		}
	})
	got := r.wait()
	for _, name := range []string{"aligned", "late"} {
		exactly(t, name, got[name], epochs, func(int) []int { return members(sub, n) })
		var counts [n][4]float64
		for _, ep := range got[name] {
			for pos, idx := range ep {
				counts[idx][pos*4/len(ep)]++
			}
		}
		chi := 0.0
		expected := float64(epochs) / 4
		for _, idx := range members(sub, n) {
			for q := range 4 {
				d := counts[idx][q] - expected
				chi += d * d / expected
			}
		}
		if chi > 84.0 {
			t.Errorf("%s: chi-square %.1f over %d epochs: the positions of its samples are not uniform", name, chi, epochs)
		}
		t.Logf("%s: chi-square %.1f (48 degrees of freedom)", name, chi)
	}
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

// liveHeap is the heap that a full collection leaves: what the process
// keeps, not what it has yet to collect.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
