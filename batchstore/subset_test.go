package batchstore

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestSetSubsetRefusesWhatTheStreamCannotServe: no subset on an unordered
// ingest (no dataset indices), none made for another dataset size, none
// so sparse that one batch of it spans more producer batches than the
// buffer holds; each refusal says why and changes nothing.
func TestSetSubsetRefusesWhatTheStreamCannotServe(t *testing.T) {
	sizeOf := func(n int) int64 { return int64(10 * n) }
	one := func(n int) *Subset {
		s, err := NewSubset("one", n, func(i int) bool { return i == 0 })
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		cfg  Config
		sub  *Subset
		want string
	}{
		{Config{Limit: 1000, BatchSize: 4, Unordered: true, SizeOf: sizeOf}, one(1), "unordered ingest"},
		{Config{Limit: 1000, BatchSize: 4, Samples: 100, SizeOf: sizeOf}, one(500), "another dataset size"},
		{Config{Limit: 400, BatchSize: 4, Samples: 100, SizeOf: sizeOf}, one(100), "raise the buffer size"},
	} {
		s := New(tc.cfg)
		// Another consumer that reads everything: c's samples are then
		// one in all of the data.
		if err := s.Join("all"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetSubset("all", nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Join("c"); err != nil {
			t.Fatal(err)
		}
		err := s.SetSubset("c", tc.sub)
		if !errors.Is(err, ErrBadSubset) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
		if cs, _ := s.ConsumerSnapshot("c"); cs.Subset != "all" {
			t.Errorf("a refused subset changed it to %q", cs.Subset)
		}
		s.Close()
	}
	if _, err := NewSubset("none", 10, func(int) bool { return false }); !errors.Is(err, ErrBadSubset) {
		t.Errorf("an empty subset: %v", err)
	}
}

// TestBatchesBeforeAMovedStartAreFreed: a consumer moved to a later
// producer epoch (its subset was not in the ordered ones) does not read
// the batches still made for the epochs before it; when nobody else
// will, they are freed as they are published, not held for a first
// reader until the buffer is full and the producer waits forever.
func TestBatchesBeforeAMovedStartAreFreed(t *testing.T) {
	ctx := context.Background()
	s := New(Config{Limit: 100, BatchSize: 2, Samples: 8, SizeOf: func(n int) int64 { return int64(10 * n) }})
	defer s.Close()
	low, _ := NewSubset("low", 8, func(i int) bool { return i < 4 })
	high, _ := NewSubset("high", 8, func(i int) bool { return i >= 4 })
	mustJoin(t, s, "a")
	if err := s.SetSubset("a", low); err != nil {
		t.Fatal(err)
	}
	for e := range 2 { // ordered while only "a" wanted: low alone
		s.FixOrder(e, func(in map[int]int, _ func(int) bool) map[int]int { return in })
	}
	mustJoin(t, s, "b")
	if err := s.SetSubset("b", high); err != nil {
		t.Fatal(err)
	}
	if cs, _ := s.ConsumerSnapshot("b"); cs.JoinedEpoch != 2 {
		t.Fatalf("b starts in producer epoch %d, want 2: epochs 0 and 1 hold none of its subset", cs.JoinedEpoch)
	}
	if err := s.Leave("a"); err != nil {
		t.Fatal(err)
	}
	for k := range 4 { // epoch 0's and 1's batches, made for the one who left
		r, err := s.Reserve(ctx, 20)
		if err != nil {
			t.Fatal(err)
		}
		blob := &fakeBlob{size: 20}
		if _, err := r.Publish(blob, Info{Epoch: k / 2, Index: k % 2, Samples: 2, Indices: []int32{int32(2 * (k % 2)), int32(2*(k%2) + 1)}, Last: k%2 == 1}); err != nil {
			t.Fatal(err)
		}
		if blob.freed.Load() != 1 {
			t.Fatalf("batch %d of epoch %d held though nobody will read it", k%2, k/2)
		}
	}
}
