package producer_test

import (
	"testing"
	"time"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// TestForeverMakesEpochAfterEpoch runs --epochs 0 race-built (the heap's
// measure over 5,000 epochs, TestForeverKeepsTheHeapFlat, runs in the
// plain build): over a one-sample dataset with batches of one, a
// consumer's batch j is its epoch j, index 0, for as long as it reads,
// and the run ends cleanly when its mount does.
func TestForeverMakesEpochAfterEpoch(t *testing.T) {
	cfg := producertest.Config(source.NewSynthetic(1, 1), 1, 0, 1)
	cfg.ImageSize = 4
	r := producertest.StartProducer(t, cfg, time.Minute)
	for j := uint64(0); j < 300; j++ {
		ref, err := r.Store.Lookup(r.Ctx, "c", j, 1)
		if err != nil {
			t.Fatalf("lookup %d: %v", j, err)
		}
		if ref.Epoch != int(j) || ref.Index != 0 || ref.Samples != 1 {
			t.Fatalf("batch %d: epoch %d, index %d, %d samples; want epoch %d, index 0, 1 sample", j, ref.Epoch, ref.Index, ref.Samples, j)
		}
		l, err := r.Store.Open(ref.Seq, 1)
		if err != nil {
			t.Fatalf("open %d: %v", j, err)
		}
		l.Release()
	}
	r.Cancel()
	if err := <-r.Done; err != nil {
		t.Fatalf("producer after its mount ended: %v", err)
	}
}
