package source_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// TestShardIndexFileSkipsTheIndexPass: shards in an object store, opened
// with an index file. The first open indexes them (a GET each) and writes
// the file; the next reads no shard, only a HEAD each to see that they
// are the ones indexed, and its first epoch reads the shards' bytes once
// in all. A shard replaced, or a damaged file, and the shards are indexed
// again and the file rewritten: never an index of other bytes.
func TestShardIndexFileSkipsTheIndexPass(t *testing.T) {
	const n, perShard = 60, 10
	server, local, spec, proxy := s3Shards(t, n, perShard)
	shards, shardBytes := producertest.ShardFiles(t, local)
	index := filepath.Join(t.TempDir(), "train.idx")
	open := func() (*source.Shards, []string) {
		t.Helper()
		before := len(proxy.Log())
		src, err := source.OpenWith(context.Background(), spec, source.Options{S3: s3Config(proxy.Endpoint), ShardIndex: index})
		if err != nil {
			t.Fatal(err)
		}
		return src.(*source.Shards), proxy.Log()[before:]
	}
	methods := func(log []string) map[string]int {
		m := map[string]int{}
		for _, line := range log {
			m[strings.Fields(line)[2]]++
		}
		return m
	}

	first, log := open()
	if m := methods(log); m["GET"] != shards || m["HEAD"] != 0 {
		t.Fatalf("first open, no index file: %v, want a GET a shard (%d)", m, shards)
	}
	written, err := os.ReadFile(index)
	if err != nil {
		t.Fatalf("the index file was not written: %v", err)
	}

	second, log := open()
	if m := methods(log); m["GET"] != 0 || m["HEAD"] != shards {
		t.Fatalf("open with the index file: %v, want no GET and a HEAD a shard (%d):\n%s", m, shards, strings.Join(log, "\n"))
	}
	if second.Len() != first.Len() {
		t.Fatalf("%d samples from the file, %d indexed", second.Len(), first.Len())
	}
	for i := range first.Len() {
		if second.Name(i) != first.Name(i) || second.Label(i) != first.Label(i) {
			t.Fatalf("sample %d: %s label %d from the file, %s label %d indexed", i, second.Name(i), second.Label(i), first.Name(i), first.Label(i))
		}
	}
	st := &second.Store().Stats
	bytes0 := st.Bytes.Load()
	batches := producertest.Produce(t, producertest.Config(second, 8, 1, 2))
	if err := (producertest.Stream{Good: producertest.All(n), Label: first.Label, BatchSize: 8, Epochs: 1}).Check(batches); err != nil {
		t.Fatal(err)
	}
	if read := st.Bytes.Load() - bytes0; read != shardBytes {
		t.Fatalf("the first epoch read %d bytes, the shards are %d", read, shardBytes)
	}

	// A shard replaced by other bytes (the last, by the one before it).
	last := filepath.Join(filepath.Dir(local), "shard-005.tar")
	other := filepath.Join(t.TempDir(), "shard-005.tar")
	data, err := os.ReadFile(filepath.Join(filepath.Dir(local), "shard-004.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, data, 0o644); err != nil {
		t.Fatal(err)
	}
	server.Put(t, "data", "train/"+filepath.Base(last), other)
	third, log := open()
	if m := methods(log); m["GET"] != shards {
		t.Fatalf("a shard replaced: %v, want the shards indexed again (%d GETs)", m, shards)
	}
	if rewritten, _ := os.ReadFile(index); bytes.Equal(rewritten, written) {
		t.Fatal("a shard replaced: the index file was not rewritten")
	}
	if third.Name(n-1) == first.Name(n-1) {
		t.Fatalf("a shard replaced: its last sample is still %s", third.Name(n-1))
	}

	// A damaged file: indexed again, rewritten whole.
	if err := os.WriteFile(index, []byte("tsock shard index 1\ngarbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, log := open(); methods(log)["GET"] != shards {
		t.Fatalf("a damaged index file: %v, want the shards indexed again", methods(log))
	}
	if _, log := open(); methods(log)["GET"] != 0 {
		t.Fatalf("after a damaged index file was rewritten: %v, want no GET", methods(log))
	}

	// A shard the file names that cannot be checked fails the open, naming
	// it, before any shard is streamed: indexing again would fail the
	// same way, after a log line promising to. Refused credentials, then
	// a shard gone.
	failing := func(what, shard string) {
		t.Helper()
		before := len(proxy.Log())
		src, err := source.OpenWith(context.Background(), spec, source.Options{S3: s3Config(proxy.Endpoint), ShardIndex: index})
		if err == nil || !strings.Contains(err.Error(), shard) || methods(proxy.Log()[before:])["GET"] != 0 {
			t.Fatalf("%s: %v, %v; want an error naming %s, no shard streamed:\n%s", what, src, err, shard, strings.Join(proxy.Log()[before:], "\n"))
		}
	}
	secret := os.Getenv("AWS_SECRET_ACCESS_KEY")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
	failing("refused credentials", "shard-000.tar")
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	if err := os.Remove(filepath.Join(server.Root, "data", "train", "shard-003.tar")); err != nil {
		t.Fatal(err)
	}
	failing("a shard gone", "shard-003.tar")
}

// TestLocalShardIndexFollowsItsShards: local shards with an index file:
// a shard rewritten (a new mtime) since makes a new index, not the old.
func TestLocalShardIndexFollowsItsShards(t *testing.T) {
	dir := producertest.Folder(t, 24, 2)
	spec := producertest.Shards(t, dir, 8)
	index := filepath.Join(t.TempDir(), "train.idx")
	open := func() source.Source {
		t.Helper()
		src, err := source.OpenWith(context.Background(), spec, source.Options{ShardIndex: index})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	a := open()
	written, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	b := open()
	if again, _ := os.ReadFile(index); !bytes.Equal(again, written) || a.Len() != b.Len() {
		t.Fatal("the shards as they were: the index file changed, or gave other samples")
	}
	shard := filepath.Join(filepath.Dir(spec), "shard-001.tar")
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(shard, later, later); err != nil {
		t.Fatal(err)
	}
	open()
	if again, _ := os.ReadFile(index); bytes.Equal(again, written) {
		t.Fatal("a shard rewritten: the index file was kept")
	}
}
