package batchstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAnEpochOfNoSamplesEndsInAnError: when every sample of an epoch is
// skipped, a consumer that waits for its batch gets ErrNoSamples at once
// (never a wait that nothing can end, never a batch of no samples), the
// producer's next wait for demand fails the same way, and Pending lists
// nothing. Also after an epoch that had samples, and with a consumer of
// its own batch size whose epochs cross an empty one.
func TestAnEpochOfNoSamplesEndsInAnError(t *testing.T) {
	for _, tc := range []struct {
		name          string
		epochs, full  int // --epochs; epochs with samples before the empty one
		batchSize     int // the consumer's; the producer's is 1
		wantReadFirst int // batches the consumer reads before the error
	}{
		{"one epoch, all skipped", 1, 0, 1, 0},
		{"two epochs, all skipped", 2, 0, 1, 0},
		{"forever, all skipped", 0, 0, 1, 0},
		{"skipped from the second epoch on", 3, 1, 1, 2},
		{"own batch size across the empty epoch", 3, 1, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Limit: 100, BatchSize: 1, Epochs: tc.epochs, Samples: 2})
			defer s.Close()
			if err := s.Join("c"); err != nil {
				t.Fatal(err)
			}
			if tc.batchSize != 1 {
				if err := s.SetBatchSize("c", tc.batchSize); err != nil {
					t.Fatal(err)
				}
			}
			for e := range tc.full {
				publish(t, s, 10, e, 0)
				r, _ := s.Reserve(context.Background(), 10)
				if _, err := r.Publish(&fakeBlob{size: 10}, Info{Epoch: e, Index: 1, Samples: 1, FirstPos: 1, EndPos: 2, Last: true}); err != nil {
					t.Fatal(err)
				}
			}
			s.EndEpoch(tc.full) // every sample of this epoch was skipped
			for j := range tc.wantReadFirst {
				read(t, s, "c", uint64(j), 1)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := s.Lookup(ctx, "c", uint64(tc.wantReadFirst), 1)
			if !errors.Is(err, ErrNoSamples) {
				t.Fatalf("lookup after the empty epoch: %v, want ErrNoSamples", err)
			}
			if refs, err := s.Pending("c"); err != nil || len(refs) != 0 {
				t.Fatalf("pending: %v %v", refs, err)
			}
			if err := s.WaitNeed(ctx, tc.full+1, 0); !errors.Is(err, ErrNoSamples) {
				t.Fatalf("the producer's wait for demand: %v, want ErrNoSamples", err)
			}
			if snap := s.Snapshot(); snap.Failure == "" {
				t.Fatal("the snapshot does not say why nothing comes")
			}
		})
	}
}
