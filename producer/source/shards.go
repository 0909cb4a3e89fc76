package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"

	"github.com/tsock/tsock/producer/source/internal/wds"
	"github.com/tsock/tsock/producer/source/remote"
)

// Shards is a dataset of WebDataset tar shards on a local disk or in an
// object store: a sample's index is its position in shard order, then
// member order. Each shard is indexed once at open (a pass over its
// headers, or the index file); each epoch then reads them in pieces, a
// read a piece, held in the shard memory and disk (shardpieces.go,
// shardread.go), and a sample of a piece not read whole alone, by a
// ranged read of its image member.
type Shards struct {
	spec  string
	files shardFiles
	paths []string
	// versions says which contents of each shard the index describes
	// (local: inode, size and mtime; S3: the ETag): a shard replaced
	// since would hand out wrong bytes at the indexed offsets.
	versions []string
	samples  []shardSample
	keys     []byte   // every sample's key, one after the other
	keyEnds  []uint32 // sample i's key is keys[keyEnds[i-1]:keyEnds[i]]
	classes  []string
	skipped  []string // "shard: key: why", what the index left out
	leftOut  int      // samples the index left out (skipped's groups, and broken tails' estimate)
	// sizes are the shards' bytes, which the pieces are cut from
	// (shardpieces.go).
	sizes []int64
	// pieces are what the shards are read in, and window how many of
	// them a training epoch's shuffle draws from (shardpieces.go); memory
	// and disk bound the bytes of pieces held (in diskDir).
	pieces       []piece
	window       int
	mix          Mix
	alone        string // why every sample is read alone; "" where pieces are read
	memory, disk int64
	diskDir      string
	index        string // what became of the index file, for status: "" without one
	labels       string // where every label is 0 for want of a label column, why: status says it
	// format is what the files are, tar or Parquet (shardformat.go):
	// what is the format's own rule is asked of it.
	format shardFormat

	// aloneReads and aloneBytes count the reads of samples read alone
	// (not in a piece): ranged reads of a tar member, a Parquet chunk or
	// page.
	aloneReads, aloneBytes atomic.Int64

	checks                    shardVersions   // this epoch's checks of shards' versions (shardversion.go)
	ctx                       context.Context // the open's: it ends every check (a stopping daemon waits on none)
	readerMu                  sync.Mutex
	reader                    *shardReader // the scheduled epoch's, nil before any
	wholeRequests, wholeBytes int64        // of readers gone
	epochs                    epochReads   // what each schedule's epoch read (shardstats.go)
	carried, carriedWasted    int64        // likewise
}

// maxKeyBytes bounds a key as kept for messages: a PAX header may name a
// member with a megabyte, and the keys' offsets are 32-bit.
const maxKeyBytes = 255

// shardSample is what a sample costs in memory, besides its key.
type shardSample struct {
	offset int64
	size   int32
	shard  int32
	label  int32
	piece  int32 // what it is read in (shardpieces.go)
}

// IsShardSpec says whether a --source value names tar shards or Parquet
// files: a path, glob or brace pattern ending in .tar or .parquet.
func IsShardSpec(spec string) bool { return strings.HasSuffix(spec, ".tar") || IsParquetSpec(spec) }

// openShards indexes the shards that pattern names in files, as many at
// a time as files allows, or takes their index from the index file at
// indexPath where it is theirs (then writing it if it was not); spec is
// what the user wrote, for messages.
func openShards(ctx context.Context, spec, pattern string, files shardFiles, opts Options) (*Shards, error) {
	indexPath := opts.ShardIndex
	format := formatOf(pattern, opts.Columns)
	opts.tell("listing the shards of %s", spec)
	paths, err := files.paths(ctx, pattern)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", strconv.Quote(spec), err)
	}
	var indexes []shardIndex
	index := ""
	if indexPath != "" {
		opts.tell("checking the index file %s against %d shards", indexPath, len(paths))
		switch indexes, err = loadIndex(ctx, indexPath, paths, files); {
		case errors.Is(err, errIndexRefused):
			// Not ours to read or to replace: indexed in memory, said.
			index, indexPath = fmt.Sprintf("not used: %v", err), ""
			slog.Warn("shard index file not used: the shards are indexed in memory", "err", err)
		case err != nil:
			return nil, fmt.Errorf("source %s: %w", strconv.Quote(spec), err)
		case indexes != nil:
			index = "read from " + indexPath
		}
	}
	if indexes == nil {
		indexes = indexAll(ctx, paths, files, format, opts)
		if indexPath != "" && !anyFailed(indexes) {
			index = "written to " + indexPath
			if err := saveIndex(indexPath, paths, indexes); err != nil {
				index = fmt.Sprintf("not written to %s: %v", indexPath, err)
				slog.Warn("could not write the shard index file: the next mount indexes the shards again", "file", indexPath, "err", err)
			}
		}
	}
	s := &Shards{spec: spec, files: files, paths: paths, versions: make([]string, len(paths)),
		sizes: make([]int64, len(paths)), index: index, format: format}
	if s.labels, err = format.opened(paths, indexes); err != nil {
		return nil, fmt.Errorf("source %s: %w", strconv.Quote(spec), err)
	}
	if s.labels != "" {
		slog.Warn(s.labels)
	}
	s.ctx = ctx
	typical := typicalShard(indexes)
	for i, ix := range indexes {
		s.versions[i], s.sizes[i] = ix.version, ix.size
		if ix.err != nil {
			return nil, fmt.Errorf("source %s: %w", strconv.Quote(spec), ix.err)
		}
		s.add(int32(i), ix, typical)
	}
	if len(s.samples) == 0 {
		if _, tar := format.(tarFormat); tar {
			return nil, fmt.Errorf("source %s: no samples in %d shards (%d groups left out; a sample is KEY.jpg (or another image) with KEY.cls or KEY.json)",
				strconv.Quote(spec), len(s.paths), len(s.skipped))
		}
		return nil, fmt.Errorf("source %s: no samples in %d %s (%d rows left out: %s)", strconv.Quote(spec), len(s.paths), format.noun(), s.leftOut, firstOf(s.skipped))
	}
	maxLabel := 0
	for _, smp := range s.samples {
		maxLabel = max(maxLabel, int(smp.label))
	}
	var note string
	if s.classes, note = format.classes(s.paths, maxLabel); note != "" {
		slog.Warn("class names", "why", note)
		s.skipped = append(s.skipped, note)
	}
	return s, nil // pieces cut and held as Arrange says, once (Open)
}

// shardFiles is where shards are: a local disk, an object store.
type shardFiles interface {
	// paths expands a spec into shard names, in order.
	paths(ctx context.Context, spec string) ([]string, error)
	// parallel is how many shards to index at once.
	parallel() int
	// index reads one shard's index.
	index(ctx context.Context, name string) shardIndex
	// version is which contents shard name has now, and its size, as
	// index would find them, without reading it.
	version(ctx context.Context, name string) (string, int64, error)
	// readAt reads len(p) bytes of shard name at off, exactly, from the
	// version that was indexed: ErrShardChanged if it was replaced.
	readAt(ctx context.Context, name, version string, p []byte, off int64) error
}

// localShards are shards on a local disk.
type localShards struct{}

func (localShards) paths(_ context.Context, spec string) ([]string, error) {
	return expandShards(spec, filepath.Glob)
}
func (localShards) parallel() int                                     { return runtime.NumCPU() }
func (localShards) index(ctx context.Context, path string) shardIndex { return indexShard(ctx, path) }

func (localShards) version(_ context.Context, path string) (string, int64, error) {
	f, err := openRegular(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return localVersion(f)
}

// ErrShardChanged: a shard's contents are no longer those it was indexed
// from; its samples are skipped, never read at stale offsets.
var ErrShardChanged = errors.New("the shard changed since it was indexed")

func (localShards) readAt(_ context.Context, path, version string, p []byte, off int64) error {
	f, err := openRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if v, _, err := localVersion(f); err != nil {
		return err
	} else if v != version {
		return ErrShardChanged
	}
	if _, err := f.ReadAt(p, off); err != nil {
		return fmt.Errorf("read %d bytes at %d: %w", len(p), off, err)
	}
	return nil
}

// expandShards expands spec into shard names, in order: braces first,
// then each name's glob matches, sorted.
func expandShards(spec string, glob func(string) ([]string, error)) ([]string, error) {
	names, err := wds.Expand(spec)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, name := range names {
		matches := []string{name}
		if strings.ContainsAny(name, "*?[") {
			if matches, err = glob(name); err != nil || len(matches) == 0 {
				return nil, fmt.Errorf("no shard matches %s", strconv.Quote(name))
			}
			sort.Strings(matches)
		}
		if len(paths)+len(matches) > wds.MaxShards {
			return nil, fmt.Errorf("more than %d shards", wds.MaxShards)
		}
		paths = append(paths, matches...)
	}
	return paths, nil
}

// shardIndex is one shard's index: its samples, what it left out, and
// why it could not be read at all (err). An index is whole or an error:
// a shard whose stream broke (a read error, a cancelled run) is err, never
// a short index, for a short one would be kept (the index file) and
// served as the dataset; only a break in the shard's own bytes (not a
// tar past some point, cut short) keeps the samples before it (broke),
// and what it cost is counted against --max-skipped.
type shardIndex struct {
	version string // see Shards.versions
	size    int64  // the shard's bytes
	samples []wds.Sample
	skips   []wds.Skip
	broke   error // where the shard broke off; the samples before stand
	err     error
	footer  []byte        // a Parquet file's footer (parquet.go); nil for a tar
	pq      *parquetShard // the footer parsed, where indexing did (not kept in the index file)
	// lost rows of a Parquet file left out whole though its footer
	// counts them (its columns are not those wanted), and why.
	lost    int64
	lostWhy string
}

func indexShard(ctx context.Context, path string) shardIndex {
	f, err := openRegular(path)
	if err != nil {
		return shardIndex{err: err}
	}
	defer f.Close()
	version, size, err := localVersion(f)
	if err != nil {
		return shardIndex{err: err}
	}
	samples, skips, broke := wds.Index(ctxFile{ctx, f})
	return wholeIndex(path, shardIndex{version: version, size: size, samples: samples, skips: skips, broke: broke})
}

// localVersion tells one content of a local shard from another: a shard
// rewritten in place changes its mtime, one renamed over its inode. It
// returns the shard's size too. Not the device: a shared file system
// (NFS, Lustre) shows each node another st_dev for the same file, and an
// index file on it, shared by the nodes, would be rewritten by each.
func localVersion(f *os.File) (string, int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", 0, fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	return fmt.Sprintf("%d:%d:%d.%09d", st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec), st.Size, nil
}

// add appends shard's index. A shard that broke off lost the samples
// after the break: typical is how many groups a whole shard holds, and
// what it lacks of that (at least one) is counted as left out.
func (s *Shards) add(shard int32, ix shardIndex, typical int) {
	path := s.paths[shard]
	for _, smp := range ix.samples {
		if smp.Size > maxFileSize {
			s.skipped = append(s.skipped, fmt.Sprintf("%s: %s: image of %d bytes is over the %d-byte limit", path, smp.Key, smp.Size, maxFileSize))
			s.leftOut++
			continue
		}
		s.samples = append(s.samples, shardSample{offset: smp.Offset, size: int32(smp.Size), shard: shard, label: int32(smp.Label)})
		s.keys = append(s.keys, smp.Key[:min(len(smp.Key), maxKeyBytes)]...)
		s.keyEnds = append(s.keyEnds, uint32(len(s.keys)))
	}
	for _, sk := range ix.skips {
		s.skipped = append(s.skipped, fmt.Sprintf("%s: %s: %s", path, sk.Key, sk.Why))
		s.leftOut += int(sk.Samples())
	}
	if ix.lost > 0 {
		s.skipped = append(s.skipped, fmt.Sprintf("%s: its %d rows: %s", path, ix.lost, ix.lostWhy))
		s.leftOut += int(ix.lost)
	}
	if ix.broke != nil {
		lost := max(1, typical-len(ix.samples)-int(skipped(ix.skips)))
		what := s.format.unit()
		s.skipped = append(s.skipped, fmt.Sprintf("%s: the rest of the %s (counted as %d samples, what a whole %s holds less what this one did): %v", path, what, lost, what, ix.broke))
		s.leftOut += lost
	}
}

// openRegular opens a shard, refusing anything but a regular file (the
// daemon runs as root: a FIFO would block, a device could act).
func openRegular(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("shard %s: not a regular file", strconv.Quote(path))
	}
	return os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
}

// Describe implements Source.
func (s *Shards) Describe() string {
	return fmt.Sprintf("%s (%d %s)", s.spec, len(s.paths), s.format.noun())
}

// Len implements Source.
func (s *Shards) Len() int { return len(s.samples) }

// Classes implements Source: the labels' numbers, 0 to the largest.
func (s *Shards) Classes() []string { return s.classes }

// Label implements Source.
func (s *Shards) Label(i int) int { return int(s.samples[i].label) }

// Name implements Source.
func (s *Shards) Name(i int) string {
	from := uint32(0)
	if i > 0 {
		from = s.keyEnds[i-1]
	}
	return s.paths[s.samples[i].shard] + ":" + string(s.keys[from:s.keyEnds[i]])
}

// Store is the object store the shards are in; nil for a local disk.
func (s *Shards) Store() *remote.Store {
	if f, ok := s.files.(s3Shards); ok {
		return f.store
	}
	return nil
}

// Remote says where the shards are and what reading them took, for
// status; "" for a local disk.
func (s *Shards) Remote() string {
	f, ok := s.files.(s3Shards)
	if !ok {
		return ""
	}
	return remoteSummary(f.String(), f.store)
}

// remoteSummary is a remote source's status line: where, its traffic,
// and what the store's faults hold up now.
func remoteSummary(where string, store *remote.Store) string {
	st := &store.Stats
	line := fmt.Sprintf("%s: %d requests, %d retried, %d resumed, %d failed, %s read", where, st.Requests.Load(), st.Retries.Load(),
		st.Resumed.Load(), st.Failures.Load(), humanize.IBytes(uint64(st.Bytes.Load())))
	if n := st.Throttled.Load(); n > 0 {
		line += fmt.Sprintf(", %d throttled (SlowDown: paced)", n)
	}
	if n := st.WholeForRange.Load(); n > 0 {
		line += fmt.Sprintf(", %d ranges answered with the whole object (the range cut out of it; %s around them read and dropped)", n, humanize.IBytes(uint64(st.Discarded.Load())))
	}
	if n := st.Slow.Load(); n > 0 {
		line += fmt.Sprintf(", %d cut under the rate floor (%s) and gone on from the byte reached", n, store.Floor())
	}
	if gap := store.Gap(); gap > 0 {
		line += fmt.Sprintf(", paced now to a request every %s", gap.Round(time.Millisecond))
	}
	if n, since, last := store.Waiting(); n > 0 {
		waited := time.Since(since)
		left := max(store.RetryFor()-waited, 0)
		line += fmt.Sprintf("; waiting out the store's faults: %d requests, for %s of --s3-retry-for %s, %s left (last: %s)",
			n, waited.Round(time.Second), store.RetryFor(), left.Round(time.Second), last)
		if w := store.Probing(); w > 0 {
			line += fmt.Sprintf("; retry quota spent: one request probes the store, %d wait for it", w)
		}
	}
	return line
}

// Left implements Vanisher: for shards in a bucket, the shards a
// listing shows now, of those indexed; on a disk, all of them.
func (s *Shards) Left(ctx context.Context) (left, of int, err error) {
	v, ok := s.files.(interface {
		left(ctx context.Context, keys []string) (int, error)
	})
	if !ok {
		return len(s.paths), len(s.paths), nil
	}
	left, err = v.left(ctx, s.paths)
	return left, len(s.paths), err
}

// Skipped lists what indexing left out, "shard: key: why".
func (s *Shards) Skipped() []string { return s.skipped }

// LeftOut implements Skipper: the samples indexing left out.
func (s *Shards) LeftOut() int { return s.leftOut }

// Encoded implements Source: from its piece, held, where the scheduled
// epoch reads it whole; else read alone, as its format reads one sample.
func (s *Shards) Encoded(ctx context.Context, i int, scratch *[]byte) ([]byte, error) {
	s.readerMu.Lock()
	r := s.reader
	s.readerMu.Unlock()
	if r != nil {
		if b, ok, err := r.sample(ctx, i, scratch); ok {
			return b, err
		}
	}
	return s.format.alone(ctx, s, i, scratch)
}

// aloneRead counts a read of n bytes for a sample read alone.
func (s *Shards) aloneRead(n int64) {
	s.aloneReads.Add(1)
	s.aloneBytes.Add(n)
}
