package source

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"
)

// Cache keeps encoded files after their first read, up to a limit, in
// memory or in one file on a local disk, so that later epochs read
// nothing from the source (CoorDL's MinIO cache). Files are kept first
// come, first kept, and never evicted: every epoch reads every file in a
// new random order, so any eviction would only trade one miss for
// another.
type Cache struct {
	Source
	limit int64
	// versioned is the source's Versioned, nil where it has none: a file
	// is served from the cache only while its source is the version it
	// was read from (a hash of it, by sample index, in versions), as
	// --keep's copies are.
	versioned Versioned
	versions  []uint64
	mu        sync.RWMutex
	files     [][]byte // in memory, by sample index; nil: not cached
	disk      *diskCache
	used      int64
	count     int
	hits      atomic.Uint64
	// misses counts reads that went to the source; dropped, files that
	// were not kept for a failed write to the disk cache (a full disk).
	misses, dropped atomic.Uint64
}

// diskCache is a Cache's file: unnamed, so that it goes with the process
// however it ends, and two mounts that share a directory never see each
// other's.
type diskCache struct {
	dir   string
	file  *os.File
	end   int64      // bytes reserved in file
	spans []diskSpan // by sample index; size 0: not cached
}

type diskSpan struct {
	off  int64
	size int32
}

// CacheConfig is a cache in front of a source (--cache, --cache-dir).
type CacheConfig struct {
	// Size bounds the bytes kept; 0: no cache.
	Size int64
	// Dir, if set, keeps them in an unnamed file there instead of
	// memory, for datasets larger than memory.
	Dir string
}

// Cached is a source with a cache in front: what the producer asks of
// it, and status's counters.
type Cached interface {
	Source
	// Holds says whether sample i's file is kept: the source under it
	// need not read it.
	Holds(i int) bool
	// Forget drops what is kept of samples (their files changed).
	Forget(samples ...int)
	Stats() CacheStats
}

var _ Cached = (*Cache)(nil)

// NewCache puts a cache of cfg.Size bytes in front of src, any Source:
// Open does for --cache; tests put one in front of sources of their own.
func NewCache(src Source, cfg CacheConfig) (*Cache, error) {
	if cfg.Dir != "" {
		return newDiskCache(src, cfg.Size, cfg.Dir)
	}
	c := &Cache{Source: src, limit: cfg.Size, files: make([][]byte, src.Len())}
	c.follow()
	return c, nil
}

// follow makes the cache check its source's versions, where it has them.
func (c *Cache) follow() {
	if v, ok := c.Source.(Versioned); ok {
		c.versioned, c.versions = v, make([]uint64, c.Source.Len())
	}
}

// newDiskCache caches src's files up to limit bytes in an unnamed file
// in dir (O_TMPFILE), for datasets larger than memory. It fails if dir
// has less than limit free: a cache that fills the disk would fail
// whatever else writes there. Close gives the space back.
func newDiskCache(src Source, limit int64, dir string) (*Cache, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return nil, fmt.Errorf("cache directory %s: %w", dir, err)
	}
	if free := int64(fs.Bavail) * fs.Bsize; free < limit {
		return nil, fmt.Errorf("cache directory %s: %s free, the cache may take %s", dir, humanize.IBytes(uint64(free)), humanize.IBytes(uint64(limit)))
	}
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cache directory %s: an unnamed file (O_TMPFILE): %w", dir, err)
	}
	c := &Cache{Source: src, limit: limit, disk: &diskCache{
		dir: dir, file: os.NewFile(uintptr(fd), dir+"/(tsock cache)"), spans: make([]diskSpan, src.Len()),
	}}
	c.follow()
	return c, nil
}

// Close gives back what the cache holds (the disk cache's space).
func (c *Cache) Close() error {
	if c.disk == nil {
		return nil
	}
	return c.disk.file.Close()
}

// Encoded implements Source: from the cache when there.
func (c *Cache) Encoded(ctx context.Context, i int, scratch *[]byte) ([]byte, error) {
	// The source's version is asked only where a copy would be served,
	// and after a read to tag what is kept (a shard's is then known
	// from the read: no HEAD in a first epoch).
	if c.Holds(i) {
		version, err := c.version(i)
		if err != nil {
			c.Forget(i) // gone or changed: what is kept is not its file
			c.misses.Add(1)
			return nil, err
		}
		if data, ok, err := c.lookup(i, version, scratch); ok || err != nil {
			if ok {
				c.hits.Add(1)
			}
			return data, err
		}
	}
	c.misses.Add(1)
	// A source whose reads check the version (a shard's: If-Match, or
	// the local check) read the version it has after the read; another
	// (a folder's file) is asked before and after, and what was read is
	// kept only if the two agree: never old bytes under a new version.
	var before uint64
	_, checked := c.Source.(readsCheckVersion)
	if !checked {
		var err error
		if before, err = c.version(i); err != nil {
			return nil, err
		}
	}
	data, err := c.Source.Encoded(ctx, i, scratch)
	if err != nil || len(data) == 0 {
		return data, err
	}
	if after, err := c.version(i); err == nil && (checked || after == before) { // else not kept: changed or gone since
		c.keep(i, after, data)
	}
	return data, nil
}

// readsCheckVersion is a source whose every read fails unless the
// sample is the version Version says (Shards: ErrShardChanged).
type readsCheckVersion interface {
	readsCheckVersion()
}

// version is a hash of sample i's version now (0 for a source without
// versions), never 0 otherwise (0 is "not kept").
func (c *Cache) version(i int) (uint64, error) {
	if c.versioned == nil {
		return 0, nil
	}
	v, err := c.versioned.Version(i)
	if err != nil {
		return 0, err
	}
	return xxhash.Sum64String(v) | 1, nil
}

// Holds says whether sample i is kept: reading it reads nothing from the
// source.
func (c *Cache) Holds(i int) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.disk == nil {
		return i < len(c.files) && c.files[i] != nil
	}
	return i < len(c.disk.spans) && c.disk.spans[i].size != 0
}

// lookup is sample i's cached bytes, if kept from version.
func (c *Cache) lookup(i int, version uint64, scratch *[]byte) ([]byte, bool, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.versioned != nil && (i >= len(c.versions) || c.versions[i] != version) {
		return nil, false, nil // not kept, or kept from another version: read again, kept anew
	}
	if c.disk == nil {
		if i >= len(c.files) { // a sample a rescan added
			return nil, false, nil
		}
		return c.files[i], c.files[i] != nil, nil
	}
	if i >= len(c.disk.spans) {
		return nil, false, nil
	}
	span := c.disk.spans[i]
	if span.size == 0 {
		return nil, false, nil
	}
	if cap(*scratch) < int(span.size) {
		*scratch = make([]byte, span.size)
	}
	b := (*scratch)[:span.size]
	if _, err := c.disk.file.ReadAt(b, span.off); err != nil {
		return nil, false, fmt.Errorf("cache file in %s: %w", c.disk.dir, err)
	}
	return b, true, nil
}

// keep stores data (of version) as sample i's if there is room; a copy
// of another version is replaced.
func (c *Cache) keep(i int, version uint64, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.versioned != nil {
		if i >= len(c.versions) {
			c.versions = append(c.versions, make([]uint64, i+1-len(c.versions))...)
		}
		if c.versions[i] != version {
			c.forgetLocked(i)
			c.versions[i] = version
		}
	}
	size := int64(len(data))
	// A rescan adds samples after the cache was made.
	if c.disk == nil && i >= len(c.files) {
		c.files = append(c.files, make([][]byte, i+1-len(c.files))...)
	}
	if c.disk != nil && i >= len(c.disk.spans) {
		c.disk.spans = append(c.disk.spans, make([]diskSpan, i+1-len(c.disk.spans))...)
	}
	if c.disk == nil {
		if c.files[i] == nil && c.used+size <= c.limit {
			c.files[i] = bytes.Clone(data)
			c.used += size
			c.count++
		}
		return
	}
	// The lock is held across the write (to the page cache, microseconds)
	// so that no reader meets a span whose bytes are not there yet.
	d := c.disk
	if d.spans[i].size != 0 || d.end+size > c.limit || size > maxFileSize {
		return
	}
	if _, err := d.file.WriteAt(data, d.end); err != nil {
		c.dropped.Add(1) // a full disk: the file is read from the source again next time
		return
	}
	d.spans[i] = diskSpan{off: d.end, size: int32(size)}
	d.end += size
	c.used += size
	c.count++
}

// Forget drops what the cache holds of samples: their files changed, so
// the next read goes to the source. Room on disk is not reused (the
// cache only appends); in memory it is given back.
func (c *Cache) Forget(samples ...int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, i := range samples {
		c.forgetLocked(i)
	}
}

// forgetLocked drops sample i. Callers hold c.mu.
func (c *Cache) forgetLocked(i int) {
	switch {
	case c.disk == nil && i < len(c.files) && c.files[i] != nil:
		c.used -= int64(len(c.files[i]))
		c.files[i] = nil
		c.count--
	case c.disk != nil && i < len(c.disk.spans) && c.disk.spans[i].size != 0:
		c.disk.spans[i] = diskSpan{}
		c.count--
	}
}

// CacheStats is what the cache holds and how often it answered.
type CacheStats struct {
	Limit, Used  int64
	Files        int
	Hits, Misses uint64
	Dropped      uint64 // files not kept for a failed write (a full disk)
	Dir          string // where the disk cache is; "" in memory
}

// HitRate is the share of reads answered from the cache, 0 before any read.
func (s CacheStats) HitRate() float64 {
	if s.Hits+s.Misses == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Hits+s.Misses)
}

// Stats returns the counters.
func (c *Cache) Stats() CacheStats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s := CacheStats{Limit: c.limit, Used: c.used, Files: c.count, Hits: c.hits.Load(), Misses: c.misses.Load(), Dropped: c.dropped.Load()}
	if c.disk != nil {
		s.Dir = c.disk.dir
	}
	return s
}
