package remote

import (
	"context"
	"sync"
	"time"
)

// The retry quota. Every request waits out its own faults (retry), but a
// store that refuses everything (credentials revoked for good, a bucket
// policy changed) must not be asked by every waiting read of a node at
// once: 64 reads ahead each retrying every few seconds sent some 30
// requests a second for the whole --s3-retry-for. So retries draw on one
// quota per store, as the AWS SDKs' standard retry mode keeps a token
// bucket: each retry spends retryCost, each success gives back (a
// first-try success refund, a retried one its cost). While the quota is
// spent, one request at a time probes the store (with its own backoff)
// and the others wait; the first success refills the quota and every
// waiting request goes on at once. Each waits within its own budget
// (Config.RetryFor from its first fault), then fails as before.

// The quota's size and costs: the AWS SDKs' (500, 5 a retry, 1 back a
// first-try success).
const (
	DefaultRetryQuota = 500
	retryCost         = 5
	refund            = 1
)

type quota struct {
	mu      sync.Mutex
	size    int
	tokens  int
	probing bool          // a request probes the spent quota's store
	back    chan struct{} // closed at a success while the quota is spent
	waiting int           // requests waiting for the probe
	last    error         // the last fault a retry met, while the quota is spent
}

// fault notes the last fault met, which a new request sent while the
// quota is spent takes as its own.
func (q *quota) fault(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.last = err
}

// failing is the last fault while a probe is out (the quota spent): a
// new request then waits for the probe rather than being sent; nil
// otherwise.
func (q *quota) failing() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.probing {
		return nil
	}
	return q.last
}

func newQuota(size int) *quota {
	return &quota{size: size, tokens: size, back: make(chan struct{})}
}

// retry takes what a retry costs before it is sent: from the quota, or,
// with the quota spent, as the one probe; else it waits until a success
// (then tries again) or until the request's budget ends at deadline
// (false). probe says whether this request holds the probe; it is kept
// across its retries and given back by done.
func (q *quota) retry(ctx context.Context, deadline time.Time, probe *bool) (bool, error) {
	for {
		q.mu.Lock()
		switch {
		case *probe:
			q.mu.Unlock()
			return true, nil
		case q.tokens >= retryCost:
			q.tokens -= retryCost
			q.mu.Unlock()
			return true, nil
		case !q.probing:
			q.probing, *probe = true, true
			q.mu.Unlock()
			return true, nil
		}
		back := q.back
		q.waiting++
		q.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-back:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		q.mu.Lock()
		q.waiting--
		q.mu.Unlock()
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if !time.Now().Before(deadline) {
			return false, nil
		}
	}
}

// ok records a success (after retries, if retried): it refunds, and
// where the quota was spent the store is back: the quota is refilled and
// every waiting request goes on.
func (q *quota) ok(retried bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.probing || q.waiting > 0 {
		q.tokens = q.size
		q.wake()
		return
	}
	if retried {
		q.tokens = min(q.tokens+retryCost, q.size)
	} else {
		q.tokens = min(q.tokens+refund, q.size)
	}
}

// done ends a request: a probe that held the quota gives it up, and the
// waiting requests are woken so that one of them probes next.
func (q *quota) done(probe bool) {
	if !probe {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.probing = false
	q.wake()
}

func (q *quota) wake() {
	close(q.back)
	q.back = make(chan struct{})
}

// spent says how many requests wait for the probe, for status (0: the
// quota is not spent).
func (q *quota) spent() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.probing {
		return 0
	}
	return q.waiting
}
