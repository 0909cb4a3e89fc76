package remote

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestThePaceRecoversWithTheStore: after a storm that slowed a node to
// the slowest pace, with 20 requests waiting, the store recovers: no
// waiter holds a turn reserved at the storm's pace (the last would wait
// 20 gaps: 20 s), and the gap is back to nothing after some 40 successes.
func TestThePaceRecoversWithTheStore(t *testing.T) {
	var p pacer
	for p.gap < maxGap {
		p.raised = time.Time{} // each doubling as if a gap apart
		p.throttled()
	}
	if err := p.wait(context.Background()); err != nil { // the storm's last request
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	start := time.Now()
	done := make(chan time.Duration, 20)
	for range 20 {
		wg.Go(func() {
			if err := p.wait(context.Background()); err != nil {
				t.Error(err)
			}
			done <- time.Since(start)
			p.ok() // each one's success shrinks the gap for the others
		})
	}
	wg.Wait()
	close(done)
	var last time.Duration
	for d := range done {
		last = max(last, d)
	}
	p.mu.Lock()
	reserved := time.Until(p.last)
	gap := p.gap
	p.mu.Unlock()
	t.Logf("20 waiters after a storm at the slowest pace: the last went after %v; the gap is now %v", last, gap)
	// Turns reserved at the storm's pace would put the last at 20 s.
	if last > 10*time.Second || reserved > 0 {
		t.Fatalf("the last of 20 waiters went after %v, a turn reserved %v ahead", last, reserved)
	}
	for range 40 {
		p.ok()
	}
	if p.gap != 0 {
		t.Fatalf("after 60 successes the gap is still %v", p.gap)
	}
}

// TestRetryAfterIsRead: seconds and HTTP dates, capped at a minute;
// nonsense and the past are none.
func TestRetryAfterIsRead(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"3": 3 * time.Second, "0": 0, "-4": 0, "3600": maxRetryAfter, "": 0, "soon": 0,
		"Sat, 28 Nov 2026 12:00:07 GMT": 7 * time.Second, "Sat, 28 Nov 2026 11:00:00 GMT": 0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

// TestBackoffIsJitteredAndBounded: each wait is drawn below its bound
// (full jitter: 100 ms doubling to 5 s), not the bound itself, so that a
// node's requests do not come back in step.
func TestBackoffIsJitteredAndBounded(t *testing.T) {
	for k := 1; k <= 12; k++ {
		limit := min(backoffBase<<(k-1), backoffCap)
		seen := map[time.Duration]bool{}
		for range 50 {
			d := backoff(k)
			if d < 0 || d > limit {
				t.Fatalf("attempt %d: waited %v, over %v", k, d, limit)
			}
			seen[d] = true
		}
		if len(seen) < 40 {
			t.Fatalf("attempt %d: %d distinct waits of 50: not jittered", k, len(seen))
		}
	}
}
