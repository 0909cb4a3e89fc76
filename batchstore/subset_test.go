package batchstore

import (
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
		{Config{Limit: 400, BatchSize: 4, Samples: 100, SizeOf: sizeOf}, one(100), "raise --buffer"},
	} {
		s := New(tc.cfg)
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
