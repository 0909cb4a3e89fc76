package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Config is how to reach the store.
type Config struct {
	// Endpoint: "" for AWS (or AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL);
	// "http://HOST:PORT" for a plain-HTTP server, "https://…" or a bare
	// HOST[:PORT] for HTTPS.
	Endpoint string
	// Profile of the shared credentials file; "" for AWS_PROFILE or
	// "default".
	Profile string
	// Attempts per request (transient faults retried), at least 1.
	Attempts int
	// Timeout of one attempt.
	Timeout time.Duration
	// StateRetry bounds how long a failure that tells of the store's
	// state rather than a sample's is tried again: credentials refused
	// after they had worked (revoked, or an STS token expired; each try
	// takes fresh ones from the chain). After it the read fails with
	// ErrUnavailable, which fails the run: never a skipped sample.
	StateRetry time.Duration
}

// DefaultConfig is what a mount uses unless told otherwise.
func DefaultConfig() Config {
	return Config{Attempts: 6, Timeout: 30 * time.Second, StateRetry: 2 * time.Minute}
}

// Stats counts requests; safe for concurrent use.
type Stats struct {
	Requests, Retries, Failures atomic.Uint64
	// Throttled counts answers that asked to slow down (503 SlowDown,
	// 429): retried, paced, never a failure while StateRetry lasts.
	Throttled atomic.Uint64
	Bytes     atomic.Int64
}

// Store is one S3-compatible endpoint.
type Store struct {
	client   *minio.Client
	creds    *credentials.Credentials
	cfg      Config
	endpoint string // for messages: scheme and host, never credentials
	Stats    Stats
	backoff  func(attempt int) time.Duration
	// worked: a request has succeeded, so the credentials were good: a
	// refusal from then on is the store's state (revoked, expired), not
	// a wrong key at start, which fails at once.
	worked atomic.Bool
	pace   pacer
}

// pacer spaces requests once the store asks to slow down: the gap
// between two requests doubles at a SlowDown (once per gap, as the
// requests in flight are all refused together) and shrinks by a
// sixteenth at each success (AIMD on the rate), so a node settles just
// under what the store serves instead of retrying in a burst.
type pacer struct {
	mu     sync.Mutex
	gap    time.Duration
	next   time.Time
	raised time.Time // when gap last doubled
}

// maxGap bounds the pacing: one request a second at the slowest.
const maxGap = time.Second

// wait holds a request until its turn.
func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	if p.gap == 0 {
		p.mu.Unlock()
		return nil
	}
	now := time.Now()
	at := now
	if p.next.After(now) {
		at = p.next
	}
	p.next = at.Add(p.gap)
	p.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
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
	if p.gap -= p.gap / 16; p.gap < 50*time.Microsecond {
		p.gap = 0
	}
}

// Dial prepares a client for cfg: credentials from the AWS environment
// variables, then the shared credentials file, then the instance's role;
// endpoint and region from cfg, the environment, then the profile in the
// shared config file.
func Dial(cfg Config) (*Store, error) {
	cfg.Attempts = max(cfg.Attempts, 1)
	profile := cfg.Profile
	if profile == "" {
		profile = firstEnv("AWS_PROFILE")
	}
	shared := loadSharedConfig(profile)
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	}
	if endpoint == "" {
		endpoint = shared.Endpoint
	}
	if endpoint == "" {
		endpoint = "https://s3.amazonaws.com"
	}
	if !strings.Contains(endpoint, "://") {
		endpoint = "https://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil {
		return nil, fmt.Errorf("S3 endpoint %q: want http://HOST:PORT or https://HOST[:PORT]", Redact(endpoint))
	}
	region := firstEnv("AWS_REGION", "AWS_DEFAULT_REGION")
	if region == "" {
		region = shared.Region
	}
	creds := credentials.NewChainCredentials([]credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.FileAWSCredentials{Profile: profile},
		&credentials.IAM{},
	})
	client, err := minio.New(u.Host, &minio.Options{
		Creds: creds, Secure: u.Scheme == "https", Region: region,
		MaxRetries:   1,                      // tsock retries, and counts
		BucketLookup: minio.BucketLookupAuto, // virtual-hosted for AWS, path-style for IPs and other servers
	})
	if err != nil {
		return nil, fmt.Errorf("S3 endpoint %s: %w", u.Scheme+"://"+u.Host, err)
	}
	return &Store{client: client, creds: creds, cfg: cfg, endpoint: u.Scheme + "://" + u.Host, backoff: backoff}, nil
}

// Endpoint names the server, for status.
func (s *Store) Endpoint() string { return s.endpoint }

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// Redact is raw with whatever may be user-info (credentials) cut out,
// for messages: everything before the last '@' but a scheme ("NAME://"
// before any '@' or '/'). It fails closed: nothing is parsed, so a URL
// that does not parse (a bad port, a stray '%', an unclosed '[', a
// space) or a secret holding '/' or "://" is cut all the same.
func Redact(raw string) string {
	at := strings.LastIndexByte(raw, '@')
	if at < 0 {
		return raw
	}
	scheme := ""
	if i := strings.Index(raw, "://"); i >= 0 && i < at && !strings.ContainsAny(raw[:i], "@/") {
		scheme = raw[:i+len("://")]
	}
	return scheme + "REDACTED@" + raw[at+1:]
}

// backoff is the wait before attempt k (from 1): 50 ms doubling, at most 2 s.
func backoff(k int) time.Duration {
	return min(50*time.Millisecond<<min(k-1, 6), 2*time.Second)
}

// do runs op until it succeeds, fails for good, or runs out of attempts:
// Config.Attempts for a transient fault, Config.StateRetry for a refusal
// of credentials that had worked.
func (s *Store) do(ctx context.Context, what string, op func(ctx context.Context) error) error {
	var err error
	start := time.Now()
	for k, transients := 1, 0; ; k++ {
		if k > 1 {
			s.Stats.Retries.Add(1)
			select {
			case <-time.After(s.backoff(k - 1)):
			case <-ctx.Done():
				return fmt.Errorf("%s: %w", what, ctx.Err())
			}
		}
		if err := s.pace.wait(ctx); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		s.Stats.Requests.Add(1)
		attempt, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		err = op(attempt)
		cancel()
		switch {
		case err == nil:
			s.worked.Store(true)
			s.pace.ok()
			return nil
		case ctx.Err() != nil:
			s.Stats.Failures.Add(1)
			return fmt.Errorf("%s: %w", what, err)
		case refused(err) && s.worked.Load():
			if time.Since(start) >= s.cfg.StateRetry {
				s.Stats.Failures.Add(1)
				return fmt.Errorf("%s: %w: the credentials that worked are refused (revoked or expired?) for %s: %w",
					what, ErrUnavailable, s.cfg.StateRetry, err)
			}
			s.creds.Expire() // the next try takes fresh ones from the chain
		case throttled(err):
			// The store serves, only slower than asked: pace and go on,
			// for as long as a store's state is waited for.
			s.Stats.Throttled.Add(1)
			s.pace.throttled()
			if time.Since(start) >= s.cfg.StateRetry {
				s.Stats.Failures.Add(1)
				return fmt.Errorf("%s: %w: throttled for %s: %w", what, ErrUnavailable, s.cfg.StateRetry, err)
			}
		case !transient(err):
			s.Stats.Failures.Add(1)
			return fmt.Errorf("%s: %w", what, err)
		default:
			if transients++; transients >= s.cfg.Attempts {
				s.Stats.Failures.Add(1)
				return fmt.Errorf("%s: %w after %d attempts: %w", what, ErrUnavailable, s.cfg.Attempts, err)
			}
		}
	}
}

// StoreFault says whether err is the store's, not a sample's: it kept
// failing (ErrUnavailable), or it refused the credentials. Such an error
// stops the run; it never marks a sample bad.
func StoreFault(err error) bool {
	return errors.Is(err, ErrUnavailable) || refused(err)
}

// refusedCodes are S3's answers that the request's credentials are not
// (or no longer) good: the store's state, not the object's.
var refusedCodes = map[string]bool{
	"AccessDenied": true, "InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "ExpiredToken": true,
	"InvalidToken": true, "TokenRefreshRequired": true, "InvalidSecurity": true,
}

// refused says whether err is a refusal of the credentials.
func refused(err error) bool {
	var resp minio.ErrorResponse
	return errors.As(err, &resp) && (refusedCodes[resp.Code] || resp.StatusCode == 401 || resp.StatusCode == 403)
}

// ErrNotFound: no such key or bucket.
var ErrNotFound = errors.New("not found")

// ErrChanged: the object is no longer the version asked for (its ETag
// changed: replaced since it was read).
var ErrChanged = errors.New("replaced since it was read (another ETag)")

// ErrUnavailable: the store kept failing in ways that should pass
// (timeouts, resets, 5xx, throttling) for every attempt. It says nothing
// of the data, so it must not be taken for a bad sample.
var ErrUnavailable = errors.New("the object store did not answer")

// throttled says whether the store asked to slow down.
func throttled(err error) bool {
	var resp minio.ErrorResponse
	return errors.As(err, &resp) && (resp.Code == "SlowDown" || resp.StatusCode == 429)
}

// transient says whether a failed attempt may succeed if tried again.
func transient(err error) bool {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch {
		case resp.StatusCode == 0:
			return true // no answer: the connection broke
		case resp.StatusCode >= 500, resp.StatusCode == 429, resp.Code == "SlowDown", resp.Code == "RequestTimeout":
			return true
		}
		return false
	}
	return !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrChanged) && !errors.Is(err, errTooLarge) // network errors, short bodies, timeouts
}

// permanent gives an error response its meaning.
func permanent(err error) error {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch resp.Code {
		case "NoSuchKey", "NoSuchBucket":
			return fmt.Errorf("%s (%w)", strings.TrimSuffix(resp.Message, "."), ErrNotFound)
		}
		if resp.StatusCode == 412 || resp.Code == "PreconditionFailed" {
			return fmt.Errorf("%s (%w)", strings.TrimSuffix(resp.Message, "."), ErrChanged)
		}
		if resp.StatusCode == 404 {
			return fmt.Errorf("%s (%w)", strings.TrimSuffix(resp.Message, "."), ErrNotFound)
		}
	}
	return err
}

// ReadAt reads len(p) bytes of bucket/key at off: exactly, or an error;
// ErrChanged if etag is set and the object's is no longer it.
func (s *Store) ReadAt(ctx context.Context, bucket, key, etag string, p []byte, off int64) error {
	return s.do(ctx, fmt.Sprintf("s3://%s/%s: %d bytes at %d", bucket, key, len(p), off), func(ctx context.Context) error {
		opts := minio.GetObjectOptions{}
		if err := opts.SetRange(off, off+int64(len(p))-1); err != nil {
			return err
		}
		if etag != "" {
			if err := opts.SetMatchETag(etag); err != nil {
				return err
			}
		}
		obj, err := s.client.GetObject(ctx, bucket, key, opts)
		if err != nil {
			return permanent(err)
		}
		defer obj.Close()
		n, err := io.ReadFull(obj, p)
		s.Stats.Bytes.Add(int64(n))
		return permanent(err)
	})
}

// Object is what a read learns of an object before its bytes.
type Object struct {
	ETag string
	Size int64
}

// Stat is what bucket/key is now: one HEAD.
func (s *Store) Stat(ctx context.Context, bucket, key string) (Object, error) {
	var obj Object
	err := s.do(ctx, fmt.Sprintf("s3://%s/%s: stat", bucket, key), func(ctx context.Context) error {
		info, err := s.client.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
		if err != nil {
			return permanent(err)
		}
		obj = Object{ETag: info.ETag, Size: info.Size}
		return nil
	})
	return obj, err
}

// Stream calls read with the whole of bucket/key as one stream and what
// it is; an attempt that breaks off is tried again from the start (read
// must start afresh).
func (s *Store) Stream(ctx context.Context, bucket, key string, read func(r io.Reader, obj Object) error) error {
	return s.do(ctx, fmt.Sprintf("s3://%s/%s", bucket, key), func(ctx context.Context) error {
		// Core's GET answers with the object's info from the response
		// headers: no HEAD request of its own.
		body, info, _, err := minio.Core{Client: s.client}.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
		if err != nil {
			return permanent(err)
		}
		defer body.Close()
		return permanent(read(&counting{r: body, n: &s.Stats.Bytes}, Object{ETag: info.ETag, Size: info.Size}))
	})
}

// Get reads the whole of bucket/key into *buf (grown as needed), at most
// limit bytes: a larger object is an error, not a read.
func (s *Store) Get(ctx context.Context, bucket, key string, buf *[]byte, limit int64) ([]byte, error) {
	var out []byte
	err := s.Stream(ctx, bucket, key, func(r io.Reader, obj Object) error {
		if obj.Size > limit || obj.Size < 0 {
			return fmt.Errorf("object of %d bytes is over the %d-byte limit (%w)", obj.Size, limit, errTooLarge)
		}
		if int64(cap(*buf)) < obj.Size {
			*buf = make([]byte, obj.Size)
		}
		out = (*buf)[:obj.Size]
		_, err := io.ReadFull(r, out)
		return err
	})
	return out, err
}

// errTooLarge is permanent: the object will not shrink on a retry.
var errTooLarge = errors.New("too large")

// Vanished checks, after a key was not found, whether the data it belonged
// to is gone as a whole: nil while bucket still lists a key under prefix
// (only that key is missing: its sample is skipped), an ErrUnavailable
// error when it lists none or the bucket is gone (an emptied bucket, a
// deleted dataset: the run fails, not an epoch of what is left).
func (s *Store) Vanished(ctx context.Context, bucket, prefix string) error {
	what := fmt.Sprintf("list s3://%s/%s", bucket, prefix)
	found := false
	err := s.do(ctx, what, func(ctx context.Context) error {
		ctx, stop := context.WithCancel(ctx) // one key is enough: the listing stops there
		defer stop()
		obj, ok := <-s.client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true, MaxKeys: 1})
		if ok && obj.Err != nil {
			return permanent(obj.Err)
		}
		found = ok
		return nil
	})
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%s: %w: the bucket is gone", what, ErrUnavailable)
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%s: %w: the dataset vanished (no key is left under the prefix)", what, ErrUnavailable)
	}
	return nil
}

// Prefixes lists the "directories" right under prefix (keys up to the
// next "/"), in order: a layout's first level, to list in parallel.
func (s *Store) Prefixes(ctx context.Context, bucket, prefix string) ([]string, error) {
	var out []string
	err := s.do(ctx, fmt.Sprintf("list s3://%s/%s", bucket, prefix), func(ctx context.Context) error {
		out = out[:0]
		for obj := range s.client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix}) {
			if obj.Err != nil {
				return permanent(obj.Err)
			}
			if strings.HasSuffix(obj.Key, "/") {
				out = append(out, obj.Key)
			}
		}
		return nil
	})
	return out, err
}

// Walk calls fn with every key under prefix and its size, in order, a
// page (1,000 keys) at a time as the store answers; listed counts the
// keys as they come, for progress. A listing that fails part way is
// tried again from the start, after reset.
func (s *Store) Walk(ctx context.Context, bucket, prefix string, listed *atomic.Int64, reset func(), fn func(key string, size int64)) error {
	return s.do(ctx, fmt.Sprintf("list s3://%s/%s", bucket, prefix), func(ctx context.Context) error {
		reset()
		for obj := range s.client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if obj.Err != nil {
				return permanent(obj.Err)
			}
			listed.Add(1)
			fn(obj.Key, obj.Size)
		}
		return nil
	})
}

// List lists the keys under prefix, in order, page by page.
func (s *Store) List(ctx context.Context, bucket, prefix string) ([]string, error) {
	var keys []string
	var listed atomic.Int64
	err := s.Walk(ctx, bucket, prefix, &listed, func() { keys = keys[:0] }, func(key string, _ int64) { keys = append(keys, key) })
	return keys, err
}

// counting counts what is read through it into n (shared) and read.
type counting struct {
	r    io.Reader
	n    *atomic.Int64
	read int64
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	c.read += int64(n)
	return n, err
}
