package batchstore

import (
	"context"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore/waittest"
)

// TestIntegersAtTheirLimits: batch sizes near 2^63 are refused, not
// wrapped into small ones, even where the buffer is as large as an
// int64 allows.
func TestIntegersAtTheirLimits(t *testing.T) {
	s := New(Config{Limit: math.MaxInt64, BatchSize: 1})
	if err := s.Join("c"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{math.MaxInt, math.MaxInt - 1, 1 << 62, MaxBatchSize + 1, 0, -1, math.MinInt} {
		if err := s.SetBatchSize("c", n); !errors.Is(err, ErrBadBatchSize) {
			t.Errorf("SetBatchSize(%d): %v, want ErrBadBatchSize", n, err)
		}
	}
	if err := s.SetBatchSize("c", MaxBatchSize); err != nil {
		t.Errorf("SetBatchSize(MaxBatchSize): %v", err)
	}
	if got, _ := s.BatchSize("c"); got != MaxBatchSize {
		t.Errorf("batch size %d after the refusals, want %d", got, MaxBatchSize)
	}
	if big := New(Config{Limit: 1 << 30, BatchSize: math.MaxInt}); big.cfg.BatchSize != MaxBatchSize {
		t.Errorf("New keeps a producer batch size of %d", big.cfg.BatchSize)
	}
}

// TestBatchSizeFitsTheGPUSlabs: a consumer batch that spans more producer
// batches than the store may hold at once (GPU slabs) would wait forever
// for room (seen: 1 slab, producer batches of 4, a consumer of 3): it is
// refused when set, and one that fits is taken.
func TestBatchSizeFitsTheGPUSlabs(t *testing.T) {
	s := New(Config{Limit: 1 << 30, BatchSize: 4, SizeOf: func(n int) int64 { return int64(n) * 100 }, MaxBatches: 2})
	if err := s.Join("c"); err != nil {
		t.Fatal(err)
	}
	// Batch size n spans up to (n-1)/4+2 producer batches.
	if err := s.SetBatchSize("c", 5); !errors.Is(err, ErrBadBatchSize) || !strings.Contains(err.Error(), "GPU slabs") {
		t.Fatalf("a batch of 5 over 2 slabs: %v, want ErrBadBatchSize naming the slabs", err)
	}
	if err := s.SetBatchSize("c", 4); err != nil {
		t.Fatalf("a batch of 4 over 2 slabs: %v", err)
	}
	if got, _ := s.BatchSize("c"); got != 4 {
		t.Fatalf("batch size %d, want 4", got)
	}
}

// TestWatchTakesAnyTimeout: a timeout of a few nanoseconds is a tick of
// zero, which time.NewTicker refuses with a panic: Watch ticks at least a
// millisecond apart instead, and does its work: a consumer that holds a
// full buffer with no open file and no progress is evicted, and the
// producer waiting for room goes on.
func TestWatchTakesAnyTimeout(t *testing.T) {
	for _, d := range []time.Duration{1, 3, 7} {
		s, room := fullBuffer(t) // "b" holds it back, with no open file
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Watch(ctx, Eviction{Timeout: d, Straggler: Block})
		}()
		select {
		case err := <-room:
			if err != nil {
				t.Fatalf("timeout %v: the producer's wait ended in %v", d, err)
			}
		case <-time.After(waittest.Limit):
			t.Fatalf("timeout %v: the stuck consumer still holds the buffer after %v", d, waittest.Limit)
		}
		if cs, err := s.ConsumerSnapshot("b"); err != nil || cs.Evicted == "" {
			t.Fatalf("timeout %v: the stuck consumer was not evicted: %+v, %v", d, cs, err)
		}
		cancel()
		<-done
	}
}

// FuzzSetBatchSize: any value written to consumers/NAME/batch_size (as
// the file system parses it), against any buffer and producer batch
// size, is refused or leaves a batch size whose spans fit the buffer.
func FuzzSetBatchSize(f *testing.F) {
	f.Add("3", int64(1<<20), 4)
	f.Add("9223372036854775807", int64(math.MaxInt64), 1)
	f.Add("16777216", int64(1<<40), 16777216)
	f.Add("-1", int64(1), -5)
	f.Fuzz(func(t *testing.T, value string, limit int64, producerBatch int) {
		n, err := strconv.Atoi(strings.TrimSpace(value))
		if err != nil || limit < 1 {
			return
		}
		s := New(Config{Limit: limit, BatchSize: producerBatch})
		if err := s.Join("c"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetBatchSize("c", n); err != nil {
			if !errors.Is(err, ErrBadBatchSize) {
				t.Fatalf("SetBatchSize(%d): %v", n, err)
			}
			return
		}
		spans := big.NewInt(int64((n-1)/s.cfg.BatchSize + 2))
		bytes := new(big.Int).Mul(spans, big.NewInt(s.buf.fullBatchBytes()))
		if n < 1 || n > MaxBatchSize || bytes.Cmp(big.NewInt(limit)) > 0 {
			t.Fatalf("batch size %d accepted with a %d-byte buffer and producer batches of %d", n, limit, s.cfg.BatchSize)
		}
	})
}

// Unwatched says since when no consumer is active: from the start, again
// once the last one leaves or is evicted, and zero while one is.
func TestUnwatchedSince(t *testing.T) {
	s := New(Config{Limit: 1 << 20, BatchSize: 1})
	if s.Snapshot().Unwatched.IsZero() {
		t.Fatal("a new store is not unwatched")
	}
	for _, n := range []string{"a", "b"} {
		if err := s.Join(n); err != nil {
			t.Fatal(err)
		}
	}
	if u := s.Snapshot().Unwatched; !u.IsZero() {
		t.Fatalf("unwatched since %v with two consumers", u)
	}
	if err := s.Leave("a"); err != nil {
		t.Fatal(err)
	}
	if u := s.Snapshot().Unwatched; !u.IsZero() {
		t.Fatalf("unwatched since %v with b still there", u)
	}
	s.mu.Lock()
	s.ev.evict(s.ros.consumers["b"], "test")
	s.mu.Unlock()
	if s.Snapshot().Unwatched.IsZero() {
		t.Fatal("not unwatched with only an evicted consumer left")
	}
}
