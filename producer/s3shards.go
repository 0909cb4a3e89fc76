package producer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/tsock/tsock/producer/remote"
	"github.com/tsock/tsock/producer/wds"
)

// IsS3Spec says whether a --source value names an object store.
func IsS3Spec(spec string) bool { return strings.HasPrefix(spec, "s3://") }

// s3Shards are shards in a bucket: names are keys.
type s3Shards struct {
	ctx    context.Context // ends every request when the mount stops
	store  *remote.Store
	bucket string
}

// OpenS3Shards indexes the shards that spec (s3://BUCKET/KEYS.tar, KEYS
// with braces and globs) names: each shard is read once, whole, as one
// stream, 16 at a time; each image is then one ranged GET. ctx bounds
// every request, then and later.
func OpenS3Shards(ctx context.Context, spec string, store *remote.Store) (*Shards, error) {
	rest := strings.TrimPrefix(spec, "s3://")
	bucket, keys, ok := strings.Cut(rest, "/")
	if !ok || bucket == "" || keys == "" {
		return nil, fmt.Errorf("source %q: want s3://BUCKET/KEY.tar (braces and globs allowed in KEY)", spec)
	}
	return openShards(spec, keys, s3Shards{ctx: ctx, store: store, bucket: bucket})
}

// s3IndexParallel is how many shards are indexed at once: the network,
// not the cores, sets the pace.
const s3IndexParallel = 16

func (f s3Shards) parallel() int { return s3IndexParallel }

func (f s3Shards) paths(keys string) ([]string, error) {
	return expandShards(keys, f.glob)
}

// glob lists the keys under pattern's fixed prefix and keeps those that
// match it.
func (f s3Shards) glob(pattern string) ([]string, error) {
	prefix := pattern[:strings.IndexAny(pattern, "*?[")]
	keys, err := f.store.List(f.ctx, f.bucket, prefix)
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

// index streams the shard once. A stream that breaks off is read again
// from the start; a shard whose bytes are not a tar past some point keeps
// what came before, as a local one does.
func (f s3Shards) index(key string) shardIndex {
	var ix shardIndex
	err := f.store.Stream(f.ctx, f.bucket, key, func(r io.Reader, etag string) error {
		samples, skips, broke := wds.Index(r)
		ix = shardIndex{version: etag, samples: samples, skips: skips, broke: broke}
		if broke != nil && !errors.Is(broke, tar.ErrHeader) && !errors.Is(broke, tar.ErrFieldTooLong) {
			// The stream broke, not the shard: again, with the store's own
			// words when it answered nothing but an error.
			if len(samples) == 0 && len(skips) == 0 && errors.Unwrap(broke) != nil {
				return errors.Unwrap(broke)
			}
			return broke
		}
		return nil
	})
	if err != nil && len(ix.samples) == 0 {
		return shardIndex{err: err}
	}
	if err != nil {
		ix.broke = err
	}
	return ix
}

func (f s3Shards) readAt(key, etag string, p []byte, off int64) error {
	err := f.store.ReadAt(f.ctx, f.bucket, key, etag, p, off)
	if errors.Is(err, remote.ErrChanged) {
		return fmt.Errorf("%w: %w", ErrShardChanged, err)
	}
	return err
}

// Describe names where the shards are, for status.
func (f s3Shards) String() string {
	return fmt.Sprintf("%s, bucket %s", f.store.Endpoint(), f.bucket)
}
