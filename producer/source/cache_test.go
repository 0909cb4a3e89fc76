package source_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// eachCache runs test with a memory cache and with a disk cache of src,
// both limited to limit bytes.
func eachCache(t *testing.T, src source.Source, limit int64, test func(t *testing.T, cache *source.Cache)) {
	t.Run("memory", func(t *testing.T) { test(t, producertest.Cache(t, src, limit, "")) })
	t.Run("disk", func(t *testing.T) {
		cache, err := source.NewCache(src, source.CacheConfig{Size: limit, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cache.Close() })
		test(t, cache)
	})
}

func TestCacheServesLaterEpochsFromItself(t *testing.T) {
	dir := producertest.Folder(t, 12, 3)
	src, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := producertest.Produce(t, producertest.Config(src, 4, 3, 2))
	eachCache(t, src, 1<<30, func(t *testing.T, cache *source.Cache) {
		producertest.EqualBatches(t, want, producertest.Produce(t, producertest.Config(cache, 4, 3, 2)), "without and with the cache")
		// The first epoch missed each file once, the other two hit.
		if s := cache.Stats(); s.Misses != 12 || s.Hits != 24 || s.Files != 12 {
			t.Fatalf("stats %+v: want 12 misses, 24 hits, 12 files", s)
		}
	})
	// A file is served from the cache only while it is the version
	// cached: one rewritten is read anew, one deleted fails as it would
	// without the cache (skipped and counted), never served from a copy.
	other, err := os.ReadFile(src.Name(5))
	if err != nil {
		t.Fatal(err)
	}
	cache := producertest.Cache(t, src, 1<<30, "")
	producertest.Produce(t, producertest.Config(cache, 4, 1, 2))
	disk, err := source.NewCache(src, source.CacheConfig{Size: 1 << 30, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	producertest.Produce(t, producertest.Config(disk, 4, 1, 2))
	if err := os.Remove(src.Name(0)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src.Name(1), other, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*source.Cache{cache, disk} {
		var scratch []byte
		if b, err := c.Encoded(context.Background(), 0, &scratch); err == nil {
			t.Fatalf("cache %q: a deleted file served (%d bytes)", c.Stats().Dir, len(b))
		}
		if b, err := c.Encoded(context.Background(), 1, &scratch); err != nil || !bytes.Equal(b, other) {
			t.Fatalf("cache %q: a rewritten file served as it was cached (%v)", c.Stats().Dir, err)
		}
		hits := c.Stats().Hits
		if _, err := c.Encoded(context.Background(), 2, &scratch); err != nil || c.Stats().Hits != hits+1 {
			t.Fatalf("cache %q: an unchanged file not served from the cache (%v)", c.Stats().Dir, err)
		}
		if b, err := c.Encoded(context.Background(), 1, &scratch); err != nil || !bytes.Equal(b, other) || c.Stats().Hits != hits+2 {
			t.Fatalf("cache %q: the rewritten file not cached anew (%v)", c.Stats().Dir, err)
		}
	}
}

func TestCacheStopsAtItsLimit(t *testing.T) {
	dir := producertest.Folder(t, 10, 2)
	src, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sizes int64
	for i := range 10 {
		st, err := os.Stat(src.Name(i))
		if err != nil {
			t.Fatal(err)
		}
		sizes = max(sizes, st.Size())
	}
	limit := 3 * sizes // room for at least three files, never all ten
	eachCache(t, src, limit, func(t *testing.T, cache *source.Cache) {
		producertest.Produce(t, producertest.Config(cache, 5, 2, 1))
		s := cache.Stats()
		if s.Used > limit || s.Files < 3 || s.Files == 10 {
			t.Fatalf("stats %+v with a limit of %d", s, limit)
		}
		if s.Hits != uint64(s.Files) || s.Misses != uint64(20-s.Files) {
			t.Fatalf("stats %+v: the second epoch should hit exactly the cached files", s)
		}
	})
}

// TestDiskCachesShareADirectory: two disk caches in one directory (two
// mounts on one node) each give their own source's bytes, leave no name
// in the directory (nothing to clean after a crash), and a cache larger
// than the disk's free space is refused naming the directory.
func TestDiskCachesShareADirectory(t *testing.T) {
	shared := t.TempDir()
	var caches []*source.Cache
	var sources []source.Source
	for range 2 {
		src, err := source.ScanFolder(producertest.Folder(t, 8, 2))
		if err != nil {
			t.Fatal(err)
		}
		cache, err := source.NewCache(src, source.CacheConfig{Size: 1 << 30, Dir: shared})
		if err != nil {
			t.Fatal(err)
		}
		defer cache.Close()
		caches, sources = append(caches, cache), append(sources, src)
	}
	for k := range caches {
		producertest.Produce(t, producertest.Config(caches[k], 4, 1, 1))
	}
	for k := range caches {
		producertest.EqualBatches(t, producertest.Produce(t, producertest.Config(sources[k], 4, 2, 1)), producertest.Produce(t, producertest.Config(caches[k], 4, 2, 1)), "a source and its shared-directory cache")
	}
	if entries, err := os.ReadDir(shared); err != nil || len(entries) != 0 {
		t.Fatalf("the cache directory holds %v (%v): want nothing named", entries, err)
	}
	if _, err := source.NewCache(sources[0], source.CacheConfig{Size: 1 << 62, Dir: shared}); err == nil || !strings.Contains(err.Error(), shared) {
		t.Fatalf("a cache larger than the disk: %v", err)
	}
}
