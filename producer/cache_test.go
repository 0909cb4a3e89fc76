package producer_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/producertest"
)

func TestCacheServesLaterEpochsFromMemory(t *testing.T) {
	dir := producertest.Folder(t, 12, 3)
	src, err := producer.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := produce(t, config(src, 4, 3, 2))
	cache := producer.NewCache(src, 1<<30)
	got := produce(t, config(cache, 4, 3, 2))
	// Same bytes as without the cache.
	if len(got) != len(want) {
		t.Fatalf("%d batches with the cache, %d without", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Images, want[i].Images) {
			t.Fatalf("batch %d differs with the cache", i)
		}
	}
	// The first epoch missed each file once, the other two hit.
	s := cache.Stats()
	if s.Misses != 12 || s.Hits != 24 || s.Files != 12 {
		t.Fatalf("stats %+v: want 12 misses, 24 hits, 12 files", s)
	}
	// Later epochs did not touch the disk: they survive its files going.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	again := produce(t, config(cache, 4, 1, 2))
	if len(again) != 3 || !bytes.Equal(again[0].Images, want[0].Images) {
		t.Fatal("a run from the cache alone did not give the first epoch again")
	}
}

func TestCacheStopsAtItsLimit(t *testing.T) {
	dir := producertest.Folder(t, 10, 2)
	src, err := producer.ScanFolder(dir)
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
	cache := producer.NewCache(src, limit)
	produce(t, config(cache, 5, 2, 1))
	s := cache.Stats()
	if s.Used > limit || s.Files < 3 || s.Files == 10 {
		t.Fatalf("stats %+v with a limit of %d", s, limit)
	}
	if s.Hits != uint64(s.Files) || s.Misses != uint64(20-s.Files) {
		t.Fatalf("stats %+v: the second epoch should hit exactly the cached files", s)
	}
}
