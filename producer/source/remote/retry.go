package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
)

// A store that fails is waited out, not fatal. Over days a store answers
// 500s and 503s, resets connections, refuses them for a while, throttles
// and recovers: each request that meets a fault is tried again after an
// exponential backoff with full jitter (so that a node's requests do not
// come back in step), at least as long as the store's Retry-After asks,
// for as long as Config.RetryFor from its first fault; then it fails
// with ErrUnavailable and the reason. A read that breaks off goes on
// from the byte it reached (a Range from there, If-Match its ETag), and
// an attempt is cut only by silence (Config.Timeout without a byte),
// never by the time a slow stream takes as a whole.

// Backoff: the first wait is up to backoffBase, doubling each attempt up
// to backoffCap; each wait is drawn uniformly below that ("full jitter").
const (
	backoffBase = 100 * time.Millisecond
	backoffCap  = 5 * time.Second
)

// backoff is the wait before attempt k (from 1, the first retry).
func backoff(k int) time.Duration {
	limit := min(backoffBase<<min(k-1, 16), backoffCap)
	return time.Duration(rand.Int64N(int64(limit) + 1))
}

// retryHint is what an attempt's answer said of when to come back.
type retryHint struct {
	mu    sync.Mutex
	after time.Duration // Retry-After
}

type hintKey struct{}

// hintTransport notes a Retry-After in the answers to 429 and 503 on the
// request's hint: minio-go's errors do not carry the headers.
type hintTransport struct{ base http.RoundTripper }

func (t hintTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if resp != nil && (resp.StatusCode == 429 || resp.StatusCode == 503) {
		if h, ok := req.Context().Value(hintKey{}).(*retryHint); ok {
			if after := retryAfter(resp.Header.Get("Retry-After"), time.Now()); after > 0 {
				h.mu.Lock()
				h.after = after
				h.mu.Unlock()
			}
		}
	}
	return resp, err
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date; 0 for
// none or nonsense. At most maxRetryAfter: a store's word does not stop a
// node for an hour.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return min(time.Duration(max(n, 0))*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), maxRetryAfter)
	}
	return 0
}

// maxRetryAfter bounds what a Retry-After may ask.
const maxRetryAfter = time.Minute

// outage is what status says of a store failing now: how many requests
// are waiting out a fault, since when the store has failed them, and the
// last fault.
type outage struct {
	mu    sync.Mutex
	n     int
	since time.Time
	last  string
}

func (o *outage) begin() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n++; o.n == 1 {
		o.since = time.Now()
	}
}

func (o *outage) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n--
}

func (o *outage) note(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = faultName(err)
}

// Waiting is how many requests are waiting out a fault of the store now,
// since when, and the last fault ("" with none waiting).
func (s *Store) Waiting() (requests int, since time.Time, last string) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	if s.faults.n == 0 {
		return 0, time.Time{}, ""
	}
	return s.faults.n, s.faults.since, s.faults.last
}

// Probing is how many requests wait while one probes a store that spent
// the retry quota (0: the quota is not spent).
func (s *Store) Probing() int { return s.quota.spent() }

// Floor says the rate floor, for status.
func (s *Store) Floor() string {
	if s.cfg.SlowRate <= 0 || s.cfg.SlowFor <= 0 {
		return "none"
	}
	return fmt.Sprintf("%d bytes a second over %s", s.cfg.SlowRate, s.cfg.SlowFor)
}

// RetryFor is the budget a request has to wait out faults.
func (s *Store) RetryFor() time.Duration { return s.cfg.RetryFor }

// faultName is a fault in a few words, for status: never a secret.
func faultName(err error) string {
	var resp minio.ErrorResponse
	switch {
	case errors.As(err, &resp) && resp.StatusCode != 0:
		return fmt.Sprintf("%d %s", resp.StatusCode, resp.Code)
	case errors.Is(err, errSilent):
		return "no byte for the timeout"
	case errors.Is(err, errSlow):
		return "a body under the rate floor"
	}
	return "no answer (connection refused, reset or cut)"
}

// do runs op, bounded by Config.Timeout as a whole (a HEAD, a page of a
// listing), under retry's policy.
func (s *Store) do(ctx context.Context, what string, op func(ctx context.Context) error) error {
	return s.retry(ctx, what, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
		return op(ctx)
	})
}

// retry runs op until it succeeds, fails for good, or the store has
// failed it for Config.RetryFor. A run that stops (ctx) is not a
// failure of the store's.
func (s *Store) retry(ctx context.Context, what string, op func(ctx context.Context) error) error {
	var failing time.Time // when this request's faults began; zero before any
	var last error        // its last fault
	probe := false        // it probes the store for the spent retry quota
	defer func() {
		if !failing.IsZero() {
			s.faults.end()
		}
		s.quota.done(probe)
	}()
	// takeQuota waits for the retry quota (quota.go) before a try.
	takeQuota := func() error {
		send, err := s.quota.retry(ctx, failing.Add(s.cfg.RetryFor), &probe)
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		case !send:
			s.Stats.Failures.Add(1)
			return fmt.Errorf("%s: %w: %s for %s (--s3-retry-for; it waited for another request to find the store back): %w", what, ErrUnavailable, why(last), s.cfg.RetryFor, last)
		}
		return nil
	}
	var wait time.Duration
	for k := 0; ; k++ {
		if k > 0 {
			s.Stats.Retries.Add(1)
			if err := sleep(ctx, wait); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			if err := takeQuota(); err != nil {
				return err
			}
		} else if fault := s.quota.failing(); fault != nil {
			// The store refuses what is sent now: a new request waits for
			// the probe too, its budget running from now.
			failing, last = time.Now(), fault
			s.faults.begin()
			s.faults.note(fault)
			if err := takeQuota(); err != nil {
				return err
			}
		}
		if err := s.pace.wait(ctx); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		s.Stats.Requests.Add(1)
		hint := &retryHint{}
		err := op(context.WithValue(ctx, hintKey{}, hint))
		switch {
		case err == nil:
			s.worked.Store(true)
			s.pace.ok()
			s.quota.ok(k > 0)
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("%s: %w", what, err) // stopped, not failed
		case refused(err) && s.worked.Load():
			s.creds.Expire() // the next try takes fresh ones from the chain
		case throttled(err):
			// The store serves, only slower than asked: pace and go on.
			s.Stats.Throttled.Add(1)
			s.pace.throttled()
		case !transient(err):
			s.Stats.Failures.Add(1)
			return fmt.Errorf("%s: %w", what, err)
		}
		now := time.Now()
		if failing.IsZero() {
			failing = now
			s.faults.begin()
		}
		s.faults.note(err)
		s.quota.fault(err)
		last = err
		spent := now.Sub(failing)
		if spent >= s.cfg.RetryFor {
			s.Stats.Failures.Add(1)
			return fmt.Errorf("%s: %w: %s for %s (--s3-retry-for): %w", what, ErrUnavailable, why(err), s.cfg.RetryFor, err)
		}
		hint.mu.Lock()
		wait = min(max(backoff(k+1), hint.after), s.cfg.RetryFor-spent)
		hint.mu.Unlock()
	}
}

// why says what kind of fault a request waited out.
func why(err error) string {
	switch {
	case refused(err):
		return "the credentials that worked are refused (revoked or expired?)"
	case throttled(err):
		return "throttled"
	}
	return "failing"
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errSilent cuts an attempt that received no byte for Config.Timeout.
var errSilent = errors.New("no byte for the attempt's timeout")

// errSlow cuts an attempt whose body came slower than the rate floor.
var errSlow = errors.New("a body slower than the rate floor")

// watched is a body whose silence is bounded, and its rate: the timer
// that cancels its request is reset by every byte, and the bytes that
// came are checked against the floor every Config.SlowFor.
type watched struct {
	ctx    context.Context
	body   io.ReadCloser
	left   int64 // the bytes of the range asked that are left; -1: all the body
	timer  *time.Timer
	d      time.Duration
	cancel context.CancelCauseFunc
	// The rate floor: got counts the bytes since the last check; floor
	// is the fewest a check may find; nil rate: no floor.
	rateMu sync.Mutex // the rate timer's field, set as its first check may run
	rate   *time.Timer
	closed bool // no check after Close
	got    atomic.Int64
	floor  int64
	slow   *atomic.Uint64 // Stats.Slow
}

// watchRate starts the floor's checks once the body begins.
func (w *watched) watchRate(cfg Config, slow *atomic.Uint64) {
	if cfg.SlowRate <= 0 || cfg.SlowFor <= 0 {
		return
	}
	w.floor, w.slow = int64(float64(cfg.SlowRate)*cfg.SlowFor.Seconds()), slow
	check := func() {
		w.rateMu.Lock()
		defer w.rateMu.Unlock()
		switch {
		case w.closed:
		case w.got.Swap(0) < w.floor:
			w.slow.Add(1)
			w.cancel(errSlow)
		default:
			w.rate.Reset(cfg.SlowFor)
		}
	}
	w.rateMu.Lock()
	defer w.rateMu.Unlock()
	w.rate = time.AfterFunc(cfg.SlowFor, check)
}

// open starts a GET of bucket/key (a Range from `from` to `to`, -1: to
// the end; If-Match etag where set) whose first byte, and then each
// silence, is bounded by Config.Timeout; ctx ends it.
func (s *Store) open(ctx context.Context, bucket, key, etag string, from, to int64) (*watched, minio.ObjectInfo, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &watched{ctx: ctx, d: s.cfg.Timeout, cancel: cancel, left: -1}
	w.timer = time.AfterFunc(w.d, func() { cancel(errSilent) })
	opts := minio.GetObjectOptions{}
	var err error
	switch {
	case to >= 0:
		err = opts.SetRange(from, to)
	case from > 0:
		err = opts.SetRange(from, 0) // minio-go's "from there to the end"
	}
	if err != nil {
		w.Close()
		return nil, minio.ObjectInfo{}, err
	}
	if etag != "" {
		if err := opts.SetMatchETag(etag); err != nil {
			w.Close()
			return nil, minio.ObjectInfo{}, err
		}
	}
	body, info, header, err := minio.Core{Client: s.client}.GetObject(ctx, bucket, key, opts)
	if err != nil {
		w.Close()
		if context.Cause(ctx) == errSilent {
			err = fmt.Errorf("%w: %w", errSilent, err)
		}
		return nil, info, permanent(err)
	}
	w.body = body
	w.timer.Reset(w.d)
	w.watchRate(s.cfg, &s.Stats.Slow)
	if from > 0 || to >= 0 {
		if err := s.inRange(w, header.Get("Content-Range"), from, to); err != nil {
			w.Close()
			return nil, info, err
		}
	}
	return w, info, nil
}

func (w *watched) Read(p []byte) (int, error) {
	if w.left >= 0 {
		if w.left == 0 {
			return 0, io.EOF
		}
		p = p[:min(int64(len(p)), w.left)]
	}
	n, err := w.body.Read(p)
	if w.left >= 0 {
		w.left -= int64(n)
	}
	if n > 0 {
		w.timer.Reset(w.d)
		w.got.Add(int64(n))
	}
	if err != nil && err != io.EOF {
		// Cut by a bound of its own: say which, so that status and the
		// error name it rather than a bare cancellation.
		if cause := context.Cause(w.ctx); errors.Is(cause, errSilent) || errors.Is(cause, errSlow) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
	}
	return n, err
}

func (w *watched) Close() error {
	w.timer.Stop()
	w.rateMu.Lock()
	w.closed = true
	if w.rate != nil {
		w.rate.Stop()
	}
	w.rateMu.Unlock()
	w.cancel(nil)
	if w.body != nil {
		return w.body.Close()
	}
	return nil
}
