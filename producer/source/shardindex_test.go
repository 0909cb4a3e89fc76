package source_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote/s3test"
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
		src, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(proxy.Endpoint), ShardIndex: index})
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
		src, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(proxy.Endpoint), ShardIndex: index})
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
		src, err := source.Open(context.Background(), spec, source.Options{ShardIndex: index})
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

// An index is whole or not at all: a shard whose stream keeps breaking
// (every GET cut in half, past the store's retries), or a pass cut short
// by the run stopping (SIGTERM, scancel), fails the open naming what
// broke, and writes no index file, never a short index that a later
// mount would serve as the dataset. One broken GET, retried, is whole.
func TestAnIndexPassCutShortKeepsNothing(t *testing.T) {
	const n, perShard = 60, 10
	server, local, spec, _ := s3Shards(t, n, perShard)
	shards, _ := producertest.ShardFiles(t, local)
	open := func(ctx context.Context, fault func(int) s3test.Fault) (source.Source, string, error) {
		proxy := s3test.StartProxy(t, server, fault)
		index := filepath.Join(t.TempDir(), "train.idx")
		cfg := s3Config(proxy.Endpoint)
		cfg.RetryFor = 300 * time.Millisecond
		src, err := source.Open(ctx, spec, source.Options{S3: cfg, ShardIndex: index})
		return src, index, err
	}

	// Every stream cut short after its first bytes (the listing passes,
	// each shard's GET is cut in half, then nothing answers): each would
	// go on from the byte it reached, until the store's budget of waiting
	// runs out.
	_, index, err := open(context.Background(), func(n int) s3test.Fault {
		switch {
		case n == 1:
			return s3test.Pass
		case n <= 1+shards:
			return s3test.Truncate
		}
		return s3test.Reset
	})
	if err == nil || !strings.Contains(err.Error(), "shard-00") {
		t.Fatalf("every stream cut short: %v, want the open failed naming a shard", err)
	}
	if _, err := os.Stat(index); !os.IsNotExist(err) {
		t.Fatalf("an index file was written from streams cut short: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, index, err = open(ctx, func(k int) s3test.Fault {
		if k == shards/2 { // the run stops mid-pass
			cancel()
		}
		return s3test.Pass
	})
	if err == nil {
		t.Fatal("an index pass cut short by the run stopping opened a source")
	}
	if _, err := os.Stat(index); !os.IsNotExist(err) {
		t.Fatalf("an index file was written by a pass cut short: %v", err)
	}

	src, index, err := open(context.Background(), func(k int) s3test.Fault {
		if k == 1 {
			return s3test.Truncate
		}
		return s3test.Pass
	})
	if err != nil || src.Len() != n {
		t.Fatalf("one stream cut short, then retried: %v, %d samples of %d", err, src.Len(), n)
	}
	if _, err := os.Stat(index); err != nil {
		t.Fatalf("a whole index was not written: %v", err)
	}
}

// A local index pass stops when the run does (SIGTERM), and keeps
// nothing: no file, no short index.
func TestALocalIndexPassStopsWithTheRun(t *testing.T) {
	spec := producertest.Shards(t, producertest.Folder(t, 20, 2), 5)
	index := filepath.Join(t.TempDir(), "train.idx")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := source.Open(ctx, spec, source.Options{ShardIndex: index}); !errors.Is(err, context.Canceled) {
		t.Fatalf("an index pass after the run stopped: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(index); !os.IsNotExist(err) {
		t.Fatalf("an index file was written by a pass that stopped: %v", err)
	}
}

// TestAnIndexFileIsTrustedOnlyFromItsUser: the trust model. An index
// file says which bytes are a sample and what its label is, so it is read
// only where nobody but the mount's user or root could have written it.
// One planted by a second user (nobody, in a sticky directory as /tmp
// is), one writable by others, one in a directory others may write, and
// anything that is not a tsock index (a user's own JSON, a FIFO, a link,
// a file over the size limit) are refused with the reason, the shards
// indexed in memory, and the file left as it was.
func TestAnIndexFileIsTrustedOnlyFromItsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root, to plant a file as a second user")
	}
	spec := producertest.Shards(t, producertest.Folder(t, 12, 2), 4)
	shared := t.TempDir()
	if err := os.Chmod(shared, os.ModeSticky|0o777); err != nil { // as /tmp
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(shared), 0o755); err != nil { // the second user reaches it
		t.Fatal(err)
	}
	index := filepath.Join(shared, "team.idx")
	open := func() string {
		t.Helper()
		src, err := source.Open(context.Background(), spec, source.Options{ShardIndex: index})
		if err != nil {
			t.Fatal(err)
		}
		if src.Len() != 12 {
			t.Fatalf("%d samples, want 12", src.Len())
		}
		return src.(*source.Shards).Stats().Index
	}
	if got := open(); !strings.HasPrefix(got, "written to") {
		t.Fatalf("first open: index %q", got)
	}
	if got := open(); !strings.HasPrefix(got, "read from") {
		t.Fatalf("an index of our own in a sticky directory: %q, want it read", got)
	}
	good, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	// A second user plants a copy (it could be any bytes with a valid
	// checksum): refused, and not overwritten.
	planted := filepath.Join(t.TempDir(), "planted.idx")
	if err := os.WriteFile(planted, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(index); err != nil {
		t.Fatal(err)
	}
	plant := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", `cat >"$0"`, index)
	if plant.Stdin, err = os.Open(planted); err != nil {
		t.Fatal(err)
	}
	if out, err := plant.CombinedOutput(); err != nil {
		t.Fatalf("planting as nobody: %v: %s", err, out)
	}
	refused := func(what, want string) {
		t.Helper()
		before, _ := os.Lstat(index)
		if got := open(); !strings.HasPrefix(got, "not used") || !strings.Contains(got, want) {
			t.Fatalf("%s: index %q, want it not used because it %s", what, got, want)
		}
		// The same inode, not modified: nothing was written over it (a
		// FIFO is not opened to compare bytes).
		after, _ := os.Lstat(index)
		if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
			t.Fatalf("%s: the file was overwritten", what)
		}
	}
	refused("a file a second user planted", "owned by uid 65534")
	if err := os.Remove(index); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(index, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(index, 0o666); err != nil {
		t.Fatal(err)
	}
	refused("a file others may write", "writable by others")
	if err := os.Chmod(index, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	refused("a directory others may replace it in", "its directory")
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := open(); !strings.HasPrefix(got, "read from") {
		t.Fatalf("our own index again: %q", got)
	}
	os.Remove(index)
	if err := os.WriteFile(index, []byte(`{"mine": true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused("a user's own file at the path", "not a tsock shard index")
	os.Remove(index)
	if f, err := os.Create(index); err != nil {
		t.Fatal(err)
	} else {
		f.Write(good[:32])
		f.Truncate(2 << 30) // sparse: no disk, 2 GiB to a reader
		f.Close()
	}
	refused("a file of 2 GiB", "over the")
	os.Remove(index)
	if err := syscall.Mkfifo(index, 0o600); err != nil {
		t.Fatal(err)
	}
	refused("a FIFO", "not a regular file")
	os.Remove(index)
	if err := os.Symlink(planted, index); err != nil {
		t.Fatal(err)
	}
	refused("a link", "not a regular file")
}
