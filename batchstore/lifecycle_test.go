package batchstore

// The store over a long life: the end of data, bounded state, epochs,
// late joiners.

import (
	"context"
	"errors"
	"testing"

	"github.com/tsock/tsock/batchstore/waittest"
)

// TestOnlyFinishIsTheEndOfData: a waiter past the held batches gets
// ErrNotFound (the end of its stream) only from Finish; a failed or shut
// down producer gives it an error, and what is held stays readable after
// a failure.
func TestOnlyFinishIsTheEndOfData(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*Store)
		want error
	}{
		{"finish", (*Store).Finish, ErrNotFound},
		{"fail", func(s *Store) { s.Fail(errors.New("disk gone")) }, ErrProducerFailed},
		{"shutdown", (*Store).Shutdown, ErrClosed},
	} {
		s := New(Config{Limit: 1000})
		mustJoin(t, s, "a")
		publish(t, s, 10, 0, 0)
		got := make(chan error, 1)
		go func() {
			_, err := s.Lookup(context.Background(), "a", 1, 1)
			got <- err
		}()
		waittest.Until(t, "the store gets there", func() bool { return s.Snapshot().Consumers[0].Waiting })
		tc.stop(s)
		if err := <-got; !errors.Is(err, tc.want) {
			t.Errorf("%s: the waiter got %v, want %v", tc.name, err, tc.want)
		}
		if tc.name != "shutdown" {
			if _, err := s.Lookup(context.Background(), "a", 0, 1); err != nil {
				t.Errorf("%s: the held batch: %v", tc.name, err)
			}
		}
	}
}

// TestLongRunsKeepBoundedState: consumers that read forever (--epochs 0)
// keep a bounded number of epoch marks and of their own computed
// batches, however many epochs pass: per-batch and per-epoch state goes
// with the batches (a daemon's RSS grew 0.9 KiB per batch read).
func TestLongRunsKeepBoundedState(t *testing.T) {
	s := New(Config{Limit: 100, BatchSize: 1, SizeOf: func(n int) int64 { return int64(10 * n) }})
	mustJoin(t, s, "a")
	mustJoin(t, s, "b")
	if err := s.SetBatchSize("b", 3); err != nil { // re-batched: one batch per epoch
		t.Fatal(err)
	}
	var a, b uint64
	for e := 0; e < 1000; e++ {
		for i := 0; i < 3; i++ {
			r, err := s.Reserve(context.Background(), 10)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.Publish(&fakeBlob{size: 10}, Info{Epoch: e, Index: i, Samples: 1, FirstPos: i, EndPos: i + 1, Last: i == 2}); err != nil {
				t.Fatal(err)
			}
			read(t, s, "a", a, 1)
			a++
		}
		if ref := read(t, s, "b", b, 2); ref.Samples != 3 {
			t.Fatalf("epoch %d: b's batch has %d samples, want 3", e, ref.Samples)
		}
		b++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.dem.epochs); n > 3 {
		t.Errorf("%d epoch marks kept after 1000 epochs", n)
	}
	for _, name := range []string{"a", "b"} {
		if n := s.ros.consumers[name].batches.Kept(); n > 130 {
			t.Errorf("%s keeps %d of its batches after reading them all", name, n)
		}
	}
}

func TestSnapshotSaysHowFarIntoItsEpochAConsumerIs(t *testing.T) {
	s := New(Config{Limit: 1000})
	mustJoin(t, s, "a")
	for i := 0; i < 3; i++ {
		publish(t, s, 10, 0, i)
	}
	for i := uint64(0); i < 2; i++ {
		read(t, s, "a", i, 1)
		if c := s.Snapshot().Consumers[0]; c.Epoch != 0 || c.EpochSamples != i+1 || c.SamplesRead != i+1 {
			t.Fatalf("after %d batches of one sample: epoch %d, %d samples of it, %d read", i+1, c.Epoch, c.EpochSamples, c.SamplesRead)
		}
	}
}

// TestNeedsSaysWhetherALateJoinerReachesPastTheEpochs: with --epochs 1,
// producer epoch 1 is needed by nobody while only a consumer that joined
// at the start reads; once another joins mid-epoch, its stitched epoch
// reaches into producer epoch 1, which is then needed (its first pieces
// are worth reading ahead).
func TestNeedsSaysWhetherALateJoinerReachesPastTheEpochs(t *testing.T) {
	s := New(Config{Limit: 1000, Epochs: 1, Samples: 2})
	mustJoin(t, s, "a")
	if !s.Needs(0) || s.Needs(1) {
		t.Fatalf("one consumer from the start: needs epoch 0 %v, epoch 1 %v; want true, false", s.Needs(0), s.Needs(1))
	}
	publish(t, s, 10, 0, 0)
	read(t, s, "a", 0, 1)
	mustJoin(t, s, "b")
	if !s.Needs(1) || s.Needs(2) {
		t.Fatalf("a consumer joined mid-epoch: needs epoch 1 %v, epoch 2 %v; want true, false", s.Needs(1), s.Needs(2))
	}
}
