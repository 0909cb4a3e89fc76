package producer

import (
	"bytes"
	"sync"
	"sync/atomic"
)

// Cache keeps encoded files in memory after their first read, up to a
// limit, so that later epochs read nothing from disk (CoorDL's MinIO
// cache). Files are kept first come, first kept, and never evicted: every
// epoch reads every file in a new random order, so any eviction would
// only trade one miss for another.
type Cache struct {
	EncodedSource
	limit        int64
	mu           sync.RWMutex
	files        [][]byte // by sample index; nil: not cached
	used         int64
	count        int
	hits, misses atomic.Uint64
}

// NewCache caches src's files up to limit bytes.
func NewCache(src EncodedSource, limit int64) *Cache {
	return &Cache{EncodedSource: src, limit: limit, files: make([][]byte, src.Len())}
}

// Encoded implements EncodedSource: from memory when cached. The bytes
// returned are shared; callers only read them.
func (c *Cache) Encoded(i int, scratch *[]byte) ([]byte, error) {
	c.mu.RLock()
	data := c.files[i]
	c.mu.RUnlock()
	if data != nil {
		c.hits.Add(1)
		return data, nil
	}
	c.misses.Add(1)
	data, err := c.EncodedSource.Encoded(i, scratch)
	if err != nil || len(data) == 0 {
		return data, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files[i] == nil && c.used+int64(len(data)) <= c.limit {
		c.files[i] = bytes.Clone(data)
		c.used += int64(len(data))
		c.count++
	}
	return data, nil
}

// Load implements Source through the cache.
func (c *Cache) Load(i int, dst *RGB, scratch *[]byte) error {
	data, err := c.Encoded(i, scratch)
	if err != nil {
		return err
	}
	return decodeImage(data, dst)
}

// CacheStats is what the cache holds and how often it answered.
type CacheStats struct {
	Limit, Used  int64
	Files        int
	Hits, Misses uint64
}

// HitRate is the share of reads answered from memory, 0 before any read.
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
	return CacheStats{Limit: c.limit, Used: c.used, Files: c.count, Hits: c.hits.Load(), Misses: c.misses.Load()}
}
