package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tsock/tsock/producer/source/internal/wds"
	"github.com/tsock/tsock/producer/source/remote"
)

// IsS3Spec says whether a --source value names an object store.
func IsS3Spec(spec string) bool { return strings.HasPrefix(spec, "s3://") }

// ParseS3Spec splits s3://BUCKET/KEY into its bucket and key (or key
// prefix), checking what S3 allows of each: a bucket of 3 to 63 of
// a-z 0-9 . -, a key of at most 1,024 bytes of valid UTF-8 without
// control characters.
func ParseS3Spec(spec string) (bucket, key string, err error) {
	shown := remote.Redact(spec) // a spec in a message: never what may be credentials
	rest, ok := strings.CutPrefix(spec, "s3://")
	if !ok {
		return "", "", fmt.Errorf("source %q: not s3://BUCKET/KEY", shown)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if strings.ContainsAny(bucket, "@:") {
		return "", "", fmt.Errorf("source %q: credentials do not go in the source: give them as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile", shown)
	}
	if len(bucket) < 3 || len(bucket) > 63 || strings.Trim(bucket, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
		return "", "", fmt.Errorf("source %q: bucket %q: want 3 to 63 of a-z, 0-9, '.' and '-'", shown, bucket)
	}
	if len(key) > 1024 || !utf8.ValidString(key) || strings.IndexFunc(key, unicode.IsControl) >= 0 {
		return "", "", fmt.Errorf("source %q: a key is at most 1,024 bytes of UTF-8 without control characters", shown)
	}
	return bucket, key, nil
}

// s3Shards are shards in a bucket: names are keys.
type s3Shards struct {
	store  *remote.Store
	bucket string
}

// openS3Shards indexes the shards that spec (s3://BUCKET/KEYS.tar, KEYS
// with braces and globs) names: each shard is read once, whole, as one
// stream, 16 at a time (or its index is taken from the index file); each
// epoch then reads the shards in pieces, a GET a piece (shardread.go),
// and samples of pieces not read whole by a ranged GET each. ctx bounds
// the indexing; each read takes its own.
func openS3Shards(ctx context.Context, spec string, store *remote.Store, opts Options) (*Shards, error) {
	bucket, keys, err := ParseS3Spec(spec)
	if err != nil {
		return nil, err
	}
	return openShards(ctx, spec, keys, s3Shards{store: store, bucket: bucket}, opts)
}

// s3IndexParallel is how many shards are indexed at once: the network,
// not the cores, sets the pace.
const s3IndexParallel = 16

func (f s3Shards) parallel() int { return s3IndexParallel }

func (f s3Shards) paths(ctx context.Context, keys string) ([]string, error) {
	return expandShards(keys, func(pattern string) ([]string, error) { return f.glob(ctx, pattern) })
}

// glob lists the keys under pattern's fixed prefix and keeps those that
// match it.
func (f s3Shards) glob(ctx context.Context, pattern string) ([]string, error) {
	prefix := pattern[:strings.IndexAny(pattern, "*?[")]
	keys, err := f.store.List(ctx, f.bucket, prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range keys {
		if ok, err := path.Match(pattern, k); err != nil {
			return nil, fmt.Errorf("pattern %q: %w", pattern, err)
		} else if ok {
			out = append(out, k)
		}
	}
	return out, nil
}

// version is the object's ETag and size now: one HEAD.
func (f s3Shards) version(ctx context.Context, key string) (string, int64, error) {
	obj, err := f.store.Stat(ctx, f.bucket, key)
	return obj.ETag, obj.Size, err
}

// index streams the shard once. A stream that breaks off is read again
// from the start, as the store's retries allow; one that still breaks is
// the shard's error (the mount fails naming it), never a short index. A
// shard whose own bytes are not a tar past some point keeps what came
// before, as a local one does.
func (f s3Shards) index(ctx context.Context, key string) shardIndex {
	var ix shardIndex
	err := f.store.Stream(ctx, f.bucket, key, func(r io.Reader, obj remote.Object) error {
		samples, skips, broke := wds.Index(r)
		ix = shardIndex{version: obj.ETag, size: obj.Size, samples: samples, skips: skips, broke: broke}
		if broke != nil && !wds.ShardsOwn(broke, obj.Size) {
			// The stream broke, not the shard: again, with the store's own
			// words when it answered nothing but an error.
			if len(samples) == 0 && len(skips) == 0 && errors.Unwrap(errors.Unwrap(broke)) != nil {
				return errors.Unwrap(errors.Unwrap(broke))
			}
			return broke
		}
		return nil
	})
	if err != nil {
		return shardIndex{err: fmt.Errorf("shard s3://%s/%s: %w", f.bucket, key, err)}
	}
	return ix
}

func (f s3Shards) readAt(ctx context.Context, key, etag string, p []byte, off int64) error {
	err := f.store.ReadAt(ctx, f.bucket, key, etag, p, off)
	if errors.Is(err, remote.ErrNotFound) {
		// A shard deleted is its samples' loss; every key gone from its
		// folder is the dataset's, and fails the run.
		if gone := f.store.Vanished(ctx, f.bucket, dir(key)); gone != nil {
			return gone
		}
	}
	if errors.Is(err, remote.ErrChanged) {
		return fmt.Errorf("%w: %w", ErrShardChanged, err)
	}
	return err
}

// dir is the folder of key, "" at the bucket's top.
func dir(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i+1]
	}
	return ""
}

// left counts which of keys a listing of their folders shows now.
func (f s3Shards) left(ctx context.Context, keys []string) (int, error) {
	want := map[string]bool{}
	dirs := map[string]bool{}
	for _, k := range keys {
		want[k], dirs[dir(k)] = true, true
	}
	left := 0
	for d := range dirs {
		found, err := f.store.List(ctx, f.bucket, d)
		if err != nil {
			return 0, err
		}
		for _, k := range found {
			if want[k] {
				left++
			}
		}
	}
	return left, nil
}

// String names where the shards are, for status.
func (f s3Shards) String() string {
	return fmt.Sprintf("%s, bucket %s", f.store.Endpoint(), f.bucket)
}
