package source

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tsock/tsock/producer/source/remote"
)

// Source is a dataset: samples numbered 0..Len()-1 in a fixed order, each
// with a class label.
type Source interface {
	// Describe names the source for status files.
	Describe() string
	// Len is the number of samples.
	Len() int
	// Classes are the class names; labels index into them.
	Classes() []string
	// Label is sample i's class.
	Label(i int) int
	// Name identifies sample i in error messages (a path for files).
	Name(i int) string
	// Encoded returns sample i's file (the bytes of a JPEG, a PNG, …),
	// read into scratch, the caller's own buffer kept between calls to
	// avoid garbage; the bytes may also be shared (a cache's), so
	// callers only read them. ctx ends a remote request: a stopping
	// producer waits on no retry.
	Encoded(ctx context.Context, i int, scratch *[]byte) ([]byte, error)
}

// Rescanner is a source that can list itself again (a local folder,
// --rescan): new samples get indices after the others, known ones keep
// theirs. Removed are the known samples the last listing did not find:
// they left the dataset (the producer makes them no more), which is not
// data lost.
type Rescanner interface {
	Rescan(ctx context.Context) (added int, err error)
	Removed() []int
}

// Sharded is a source whose samples live in shards that are best read
// in pieces of many samples (shardpieces.go, shardread.go): the producer
// orders each epoch piece by piece (ShardShuffle over ShuffleWindow
// pieces) and tells it each epoch's order before making it, and how it
// expects the next to begin (nil: no guess), so that the next epoch's
// first pieces are read ahead.
type Sharded interface {
	Piece(i int) int
	Pieces() int
	// PieceClass is a piece's class, the label most of its samples have:
	// ShardShuffle spreads a class's pieces around the epoch.
	PieceClass(p int) int
	ShuffleWindow() int
	// ReadsWhole says whether the planned epoch reads sample i from its
	// piece, read whole ahead: a fetcher leaves it to the source.
	ReadsWhole(i int) bool
	Schedule(order, next []int)
	// Stats is status's view: pieces, memory, disk, reads, the mix.
	Stats() ShardStats
}

// Remote is a source in an object store.
type Remote interface {
	// Store is the client, for its request counters; nil: a local
	// source after all (shards on a local disk).
	Store() *remote.Store
	// Remote is status's line: where, and the counters.
	Remote() string
}

// Versioned is a source that can tell whether a sample's bytes changed
// since they were read (a local folder: the file's inode, size and
// mtime): a sample skipped is tried again once its file changes (under
// --rescan), and a kept sample is served only while its file is the one
// it was made from.
type Versioned interface {
	// Version is sample i's version now; an error if it cannot be read
	// (a file deleted).
	Version(i int) (string, error)
}

// Skipper is a source that left samples out when it was opened (shard
// members without an image or a label, broken tails), each named.
// LeftOut is how many samples that was: they count against
// --max-skipped as samples skipped later do, over a dataset of Len()
// plus them.
type Skipper interface {
	Skipped() []string
	LeftOut() int
}

// Vanisher is a source whose dataset can vanish as a whole (keys in a
// bucket, deleted key by key): a key found missing is its sample's loss
// only while the dataset is still there. Left lists the dataset now: how
// many of its keys are left, of those it had when opened; an error is
// the store's state (the bucket gone).
type Vanisher interface {
	Left(ctx context.Context) (left, of int, err error)
}

// As is the capability T of src, or of the source under its cache:
// what only some kinds of source do (Rescanner, Remote, Skipper).
func As[T any](src Source) (T, bool) {
	if c, ok := src.(*Cache); ok {
		src = c.Source
	}
	t, ok := src.(T)
	return t, ok
}

// Options are how a source is opened, besides its spec.
type Options struct {
	// S3 is how to reach an object store, for s3:// sources; the zero
	// value is remote.DefaultConfig().
	S3 remote.Config
	// ShardIndex is an index file for tar shards (see shardindex.go):
	// read where it indexes these shards as they are, else written.
	ShardIndex string
	// Shards, for tar shards, is the room they are read into and the
	// batch size the shuffle is judged at (Shards.Arrange); nil: the
	// default shard memory, no shard disk.
	Shards *ShardSpace
	// Columns names the image and label columns of Parquet files
	// (--columns); the zero value takes the Hub's.
	Columns Columns
	// Cache, if its Size is set, keeps the source's files across epochs
	// (--cache, --cache-dir).
	Cache CacheConfig
	// Progress, if set, is told what opening the source is doing now,
	// one line, as it goes (each folder listed, each shard indexed): a
	// long listing or index pass is seen, not silent (the mount's status
	// while it starts).
	Progress func(line string)
}

// tell calls o.Progress, if set.
func (o Options) tell(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, args...))
	}
}

// Open opens a --source value, the one way in: a directory in
// ImageFolder form, tar shards in WebDataset form (a path, glob or brace
// pattern ending in .tar), either of them in an object store (s3://),
// or "synthetic:N" for N generated images; then arranges shards and puts
// a cache in front as opts say. ctx bounds every remote request, then
// and later (the mount's: a stopping daemon waits on no retry). What a
// caller may ask of the source beyond Source is an interface here
// (Sharded, Cached, Remote, Rescanner, Versioned, Skipper; see As); a
// source that holds resources is an io.Closer.
func Open(ctx context.Context, spec string, opts Options) (Source, error) {
	if opts.S3 == (remote.Config{}) {
		opts.S3 = remote.DefaultConfig()
	}
	src, err := open(ctx, spec, opts)
	if err != nil {
		return nil, err
	}
	if sh, ok := src.(*Shards); ok {
		space := ShardSpace{Memory: DefaultShardMemory} // and no disk, where opts say nothing
		if opts.Shards != nil {
			space = *opts.Shards
		}
		if err := sh.Arrange(space); err != nil {
			return nil, fmt.Errorf("shard disk: %w", err)
		}
	}
	if opts.Cache.Size > 0 {
		return NewCache(src, opts.Cache)
	}
	return src, nil
}

// open opens spec's source as it is, with no cache.
func open(ctx context.Context, spec string, opts Options) (Source, error) {
	s3 := opts.S3
	if IsS3Spec(spec) {
		store, err := remote.Dial(s3)
		if err != nil {
			return nil, fmt.Errorf("source %q: %w", remote.Redact(spec), err)
		}
		bucket, key, err := ParseS3Spec(spec)
		if err != nil {
			return nil, err
		}
		if IsShardSpec(key) {
			return openS3Shards(ctx, spec, store, opts)
		}
		return openS3Folder(ctx, bucket, key, store, opts)
	}
	if rest, ok := strings.CutPrefix(spec, "synthetic:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n <= 0 || n > maxSynthetic {
			return nil, fmt.Errorf("source %q: synthetic:N needs a positive whole number of images, at most %d", spec, maxSynthetic)
		}
		return NewSynthetic(n, 10), nil
	}
	if spec == "" {
		return nil, fmt.Errorf("source: no directory given")
	}
	if IsShardSpec(spec) {
		return openShards(ctx, spec, spec, localShards{}, opts)
	}
	return scanFolder(ctx, spec, opts)
}

// maxSynthetic bounds synthetic:N: the producer keeps each epoch's order,
// 8 bytes a sample, and a typo must not ask for terabytes.
const maxSynthetic = 1 << 28
