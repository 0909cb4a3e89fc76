package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
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
	// Timeout bounds the wait for an attempt's first byte, and then each
	// silence between bytes: a slow stream goes on for as long as bytes
	// come (retry.go).
	Timeout time.Duration
	// RetryFor bounds how long a request waits out a store that fails it
	// (timeouts, resets, refused connections, 5xx, throttling, and
	// credentials refused after they had worked: revoked, or an STS token
	// expired, each try taking fresh ones from the chain), from its first
	// fault, with exponential backoff and full jitter, and Retry-After
	// honoured. After it the read fails with ErrUnavailable, which fails
	// the run: never a skipped sample.
	RetryFor time.Duration
	// SlowRate and SlowFor are the floor under a body's rate: an attempt
	// whose body brings fewer than SlowRate bytes a second over SlowFor
	// (a connection that trickles: a byte now and then keeps Timeout's
	// silence from ever running out) is cut and goes on from the byte
	// reached on a fresh connection, as curl's --speed-limit and
	// --speed-time. 0: no floor.
	SlowRate int64
	SlowFor  time.Duration
	// RetryQuota is the store's retry quota (quota.go), in tokens; a
	// retry costs 5. 0: DefaultRetryQuota.
	RetryQuota int
}

// DefaultConfig is what a mount uses unless told otherwise: a floor of
// 1 KiB/s over 30 s, far under any link a dataset is read over (a 5 KB/s
// one reads on undisturbed).
func DefaultConfig() Config {
	return Config{Timeout: 30 * time.Second, RetryFor: 2 * time.Minute, SlowRate: 1 << 10, SlowFor: 30 * time.Second}
}

// Stats counts requests; safe for concurrent use.
type Stats struct {
	Requests, Retries, Failures atomic.Uint64
	// Throttled counts answers that asked to slow down (503 SlowDown,
	// 429): retried, paced, never a failure while RetryFor lasts.
	Throttled atomic.Uint64
	Bytes     atomic.Int64
	// Resumed counts reads that broke off and went on from the byte
	// reached (a Range from there), not from the start.
	Resumed atomic.Uint64
	// WholeForRange counts ranged GETs answered 200 with the whole
	// object (a server or gateway that ignores Range): the range was
	// cut out of the body; Discarded counts the bytes around it.
	WholeForRange atomic.Uint64
	Discarded     atomic.Int64
	// Slow counts attempts cut for a body under the rate floor
	// (Config.SlowRate over Config.SlowFor), each gone on from the byte
	// reached on a fresh connection.
	Slow atomic.Uint64
}

// Store is one S3-compatible endpoint.
type Store struct {
	client   *minio.Client
	creds    *credentials.Credentials
	cfg      Config
	endpoint string // for messages: scheme and host, never credentials
	Stats    Stats
	// worked: a request has succeeded, so the credentials were good: a
	// refusal from then on is the store's state (revoked, expired), not
	// a wrong key at start, which fails at once.
	worked atomic.Bool
	pace   pacer
	faults outage
	quota  *quota
}

// Dial prepares a client for cfg: credentials from the AWS environment
// variables, then the shared credentials file, then the instance's role;
// endpoint and region from cfg, the environment, then the profile in the
// shared config file.
func Dial(cfg Config) (*Store, error) {
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
	transport, err := minio.DefaultTransport(u.Scheme == "https")
	if err != nil {
		return nil, fmt.Errorf("S3 endpoint %s: %w", u.Scheme+"://"+u.Host, err)
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds: creds, Secure: u.Scheme == "https", Region: region, Transport: hintTransport{transport},
		MaxRetries:   1,                      // tsock retries, and counts
		BucketLookup: minio.BucketLookupAuto, // virtual-hosted for AWS, path-style for IPs and other servers
	})
	if err != nil {
		return nil, fmt.Errorf("S3 endpoint %s: %w", u.Scheme+"://"+u.Host, err)
	}
	size := cfg.RetryQuota
	if size <= 0 {
		size = DefaultRetryQuota
	}
	return &Store{client: client, creds: creds, cfg: cfg, endpoint: u.Scheme + "://" + u.Host, quota: newQuota(size)}, nil
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

// StoreFault says whether err is the store's, not a sample's: it kept
// failing (ErrUnavailable), or it refused the credentials. Such an error
// stops the run; it never marks a sample bad.
func StoreFault(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrBucketGone) || refused(err)
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

// ErrNotFound: no such key.
var ErrNotFound = errors.New("not found")

// ErrBucketGone: no such bucket. The store's state, never a sample's.
var ErrBucketGone = errors.New("no such bucket: the bucket is gone")

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
	return !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrChanged) && !errors.Is(err, errTooLarge) && !errors.Is(err, ErrBucketGone) // network errors, short bodies, timeouts
}

// permanent gives an error response its meaning.
func permanent(err error) error {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch resp.Code {
		case "NoSuchKey":
			return fmt.Errorf("%s (%w)", strings.TrimSuffix(resp.Message, "."), ErrNotFound)
		case "NoSuchBucket":
			// The store's state, never a sample's: a bucket deleted under
			// a mount fails the run at its first request that meets it.
			return fmt.Errorf("%s (%w)", strings.TrimSuffix(resp.Message, "."), ErrBucketGone)
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
// ErrChanged if etag is set and the object's is no longer it. A read
// that breaks off goes on from the byte reached where etag says which
// object that is (else from the start).
func (s *Store) ReadAt(ctx context.Context, bucket, key, etag string, p []byte, off int64) error {
	got := 0
	return s.retry(ctx, fmt.Sprintf("s3://%s/%s: %d bytes at %d", bucket, key, len(p), off), func(ctx context.Context) error {
		if got > 0 && etag == "" {
			got = 0 // another version might answer a Range from there
		}
		if got > 0 {
			s.Stats.Resumed.Add(1)
		}
		body, _, err := s.open(ctx, bucket, key, etag, off+int64(got), off+int64(len(p))-1)
		if err != nil {
			return err
		}
		defer body.Close()
		n, err := io.ReadFull(body, p[got:])
		got += n
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
// it is. A stream that breaks off goes on from the byte reached (a Range
// from there, If-Match the ETag it began with), unseen by read; where it
// cannot, the attempt fails and is tried again from the start (read must
// start afresh).
func (s *Store) Stream(ctx context.Context, bucket, key string, read func(r io.Reader, obj Object) error) error {
	what := fmt.Sprintf("s3://%s/%s", bucket, key)
	return s.retry(ctx, what, func(ctx context.Context) error {
		body, info, err := s.open(ctx, bucket, key, "", 0, -1)
		if err != nil {
			return err
		}
		r := &resuming{s: s, ctx: ctx, what: what, bucket: bucket, key: key, etag: info.ETag, size: info.Size, body: body}
		defer r.close()
		return permanent(read(&counting{r: r, n: &s.Stats.Bytes}, Object{ETag: info.ETag, Size: info.Size}))
	})
}

// resuming reads an object's body, opening it again from the byte
// reached when it breaks off, under retry's policy.
type resuming struct {
	s                       *Store
	ctx                     context.Context
	what, bucket, key, etag string
	size, pos               int64
	body                    *watched
}

func (r *resuming) Read(p []byte) (int, error) {
	for {
		if r.body == nil {
			return 0, fmt.Errorf("%s: read after a failed resumption", r.what)
		}
		n, err := r.body.Read(p)
		r.pos += int64(n)
		if n > 0 || err == nil || (err == io.EOF && r.pos >= r.size) {
			return n, err
		}
		if r.ctx.Err() != nil || r.etag == "" || !transient(err) {
			return 0, err
		}
		r.body.Close()
		r.s.Stats.Resumed.Add(1)
		if err := r.s.retry(r.ctx, fmt.Sprintf("%s from byte %d", r.what, r.pos), func(ctx context.Context) error {
			body, _, err := r.s.open(context.WithValue(r.ctx, hintKey{}, ctx.Value(hintKey{})), r.bucket, r.key, r.etag, r.pos, -1)
			if err == nil {
				r.body = body
			}
			return err
		}); err != nil {
			r.body = nil
			return 0, err
		}
	}
}

func (r *resuming) close() {
	if r.body != nil {
		r.body.Close()
	}
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
	case errors.Is(err, ErrBucketGone):
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
