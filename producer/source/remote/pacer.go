package remote

import (
	"context"
	"sync"
	"time"
)

// pacer spaces requests once the store asks to slow down: the gap
// between two requests doubles at a SlowDown (once per gap, as the
// requests in flight are all refused together) and shrinks by a quarter
// at each success, so a node settles just under what the store serves
// instead of retrying in a burst, and is back to full speed within
// seconds of the store's recovery (from the slowest gap, about 4 times
// it: the gaps of the successes that shrink it sum to that).
//
// No request reserves a turn ahead: a waiter sleeps until the gap it
// sees has passed since the last request and looks again, so a gap that
// shrank meanwhile lets it go sooner. (Turns reserved at the slowest pace
// during a storm kept a node at one request a second for a minute after
// it.)
type pacer struct {
	mu     sync.Mutex
	gap    time.Duration
	last   time.Time // when the last request went
	raised time.Time // when gap last doubled
}

// maxGap bounds the pacing: one request a second at the slowest.
const maxGap = time.Second

// wait holds a request until its turn.
func (p *pacer) wait(ctx context.Context) error {
	for {
		p.mu.Lock()
		now := time.Now()
		d := p.last.Add(p.gap).Sub(now)
		if p.gap == 0 || d <= 0 {
			p.last = now
			p.mu.Unlock()
			return nil
		}
		p.mu.Unlock()
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
}

func (p *pacer) throttled() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.raised) >= max(p.gap, 50*time.Millisecond) {
		p.gap, p.raised = min(max(2*p.gap, time.Millisecond), maxGap), now
	}
}

func (p *pacer) ok() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gap -= p.gap / 4; p.gap < 50*time.Microsecond {
		p.gap = 0
	}
}

// Gap is the pacing now: 0 when the store is not throttling.
func (s *Store) Gap() time.Duration {
	s.pace.mu.Lock()
	defer s.pace.mu.Unlock()
	return s.pace.gap
}
