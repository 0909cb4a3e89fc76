package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs/fusetest"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// TestMountServesTarShards: --source with a brace pattern of WebDataset
// shards mounts, serves every sample once per epoch with its label, and
// status names the shards and what their index left out.
func TestMountServesTarShards(t *testing.T) {
	t.Parallel() // see parallelTests
	dir := producertest.Folder(t, 20, 2)
	spec := producertest.Shards(t, dir, 8) // 3 shards
	junk := filepath.Join(filepath.Dir(strings.Replace(spec, "{000..002}", "000", 1)), "shard-003.tar")
	if err := os.WriteFile(junk, []byte("not a tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec = strings.Replace(spec, "{000..002}", "{000..003}", 1)
	// A shard that is not a tar lost what a whole shard holds (8 samples
	// of 28): within a budget of 30%, not the default 10% (below).
	if code, out := runCLI(t, "mount", t.TempDir(), "--source", spec); code != exitError || !strings.Contains(out, "8 of 28 samples skipped, over --max-skipped 10%") {
		t.Fatalf("a mount over the skip budget at open: exit %d, %q", code, out)
	}
	d := startDaemon(t, "--source", spec, "--batch-size", "6", "--image-size", "16", "--epochs", "1", "--max-skipped", "30%")
	reader, out := consume(t, d, "c")
	if err := reader.Wait(); err != nil {
		t.Fatalf("consumer: %v", err)
	}
	batches, _ := readCopies(t, out)
	seen := map[int64]int64{}
	for _, b := range batches {
		for i, idx := range b.Indices {
			seen[idx] = b.Labels[i]
		}
	}
	if len(seen) != 20 || seen[0] != 0 || seen[19] != 1 {
		t.Fatalf("served %d samples (labels %v), want 20 with their classes", len(seen), seen)
	}
	st := readFile(t, filepath.Join(d.dir, "status"))
	if !strings.Contains(st, "(4 tar shards)") || !regexp.MustCompile(`(?m)^left out when the source was listed or indexed: 1 \(8 samples, counted against --max-skipped\)\n  left out: .*shard-003\.tar: the rest of the shard \(counted as 8 samples`).MatchString(st) {
		t.Fatalf("status:\n%s", st)
	}
	d.stop(t)
}

// TestMountServesShardsFromS3: a mount of shards in a real S3 server on
// loopback serves every sample of two epochs, the second from a disk
// cache (no request to the store, no name left in the cache directory),
// and status, status.json and metrics count the requests, bytes and cache
// hits without showing a credential; a bucket that does not exist and
// wrong credentials exit 1 with one line that names the problem, and no
// secret.
func TestMountServesShardsFromS3(t *testing.T) {
	server, _ := shardsInS3(t)
	spec := "s3://data/train/shard-{000..002}.tar"
	cacheDir := t.TempDir()
	d := startDaemon(t, "--source", spec, "--s3-endpoint", server.Endpoint, "--batch-size", "6", "--image-size", "16", "--epochs", "2",
		"--cache", "64MiB", "--cache-dir", cacheDir)
	reader, out := consume(t, d, "c")
	if err := reader.Wait(); err != nil {
		t.Fatalf("consumer: %v", err)
	}
	batches, _ := readCopies(t, out)
	n := 0
	for _, b := range batches {
		n += len(b.Indices)
	}
	st := readFile(t, filepath.Join(d.dir, "status"))
	if n != 40 || !regexp.MustCompile(`(?m)^remote: http://127\.0\.0\.1:\d+, bucket data: \d+ requests, 0 retried, 0 resumed, 0 failed, .* read; .*/s over the last 10 s$`).MatchString(st) ||
		!strings.Contains(st, "on disk in "+cacheDir+", 20 files; hit rate 50% (20 hits, 20 misses)") || strings.Contains(st, s3test.SecretKey) {
		t.Fatalf("%d samples served; status:\n%s", n, st)
	}
	var doc statusDoc
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(d.dir, "status.json"))), &doc); err != nil {
		t.Fatal(err)
	}
	// 3 shards indexed, a LIST-free spec: 3 streams, then each shard read
	// whole once in the first epoch (20 ranged reads before shards were
	// read whole); the second epoch is the cache's, but for a HEAD a
	// shard that checks each is still the version cached.
	if doc.Remote == nil || doc.Remote.Requests != 9 || doc.Remote.Bytes <= 0 || doc.Remote.Retries != 0 ||
		doc.Cache == nil || doc.Cache.Hits != 20 || doc.Cache.Misses != 20 || doc.Cache.Dir != cacheDir {
		t.Fatalf("status.json: remote %+v, cache %+v", doc.Remote, doc.Cache)
	}
	metrics := readFile(t, filepath.Join(d.dir, "metrics"))
	if !strings.Contains(metrics, "tsock_remote_requests_total 9\n") || !strings.Contains(metrics, "tsock_cache_hits_total 20\n") {
		t.Fatalf("metrics:\n%s", metrics)
	}
	if entries, err := os.ReadDir(cacheDir); err != nil || len(entries) != 0 {
		t.Fatalf("the cache directory holds %v (%v)", entries, err)
	}
	d.stop(t)
	mp := t.TempDir()
	for _, tc := range []struct{ spec, secret, want string }{
		{"s3://nobucket/train/shard-000.tar", s3test.SecretKey, "no such bucket"},
		{"s3://data/train/shard-009.tar", s3test.SecretKey, "The specified key does not exist (not found)"},
		{spec, "wrong-secret-value", "s3://data/train/shard-000.tar"},
	} {
		t.Setenv("AWS_SECRET_ACCESS_KEY", tc.secret)
		code, out := runCLI(t, "mount", mp, "--source", tc.spec, "--s3-endpoint", server.Endpoint)
		if code != exitError || !strings.Contains(out, tc.want) || strings.Count(strings.TrimSpace(out), "\n") != 0 || strings.Contains(out, tc.secret) {
			t.Errorf("%s: exit %d, output %q; want exit 1, one line naming %q, no secret", tc.spec, code, out, tc.want)
		}
	}
	if fusetest.Mounted(t, mp) {
		t.Fatal("a failed mount left a mount behind")
	}
}

// TestMountReadsTheShardIndexFile: two mounts, one after the other, of
// shards in S3 with --shard-index: the first indexes them (reading every
// byte) and writes the file, so that its epoch reads the shards twice in
// all; the second reads the file, a HEAD a shard, and its epoch reads the
// shards' bytes once. status, status.json and the metrics say so. The
// same without the flag, the file in the user's cache directory; with
// --shard-index none, each mount indexes the shards.
func TestMountReadsTheShardIndexFile(t *testing.T) {
	server, local := shardsInS3(t)
	_, shardBytes := producertest.ShardFiles(t, local)
	spec := "s3://data/train/shard-{000..002}.tar"
	t.Run("file", func(t *testing.T) {
		index := filepath.Join(t.TempDir(), "train.idx")
		mountTwice(t, server, spec, shardBytes, index, "--shard-index", index)
	})
	t.Run("default", func(t *testing.T) {
		t.Setenv("XDG_CACHE_HOME", t.TempDir())
		index := defaultShardIndex(spec, server.Endpoint)
		mountTwice(t, server, spec, shardBytes, index)
		if _, err := os.Stat(index); err != nil {
			t.Fatalf("the default index file: %v", err)
		}
	})
	t.Run("unwritable", func(t *testing.T) { // the mount goes on, and says so
		notDir := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(notDir, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("XDG_CACHE_HOME", notDir)
		d := startDaemon(t, "--source", spec, "--s3-endpoint", server.Endpoint, "--batch-size", "6", "--image-size", "16", "--epochs", "1")
		reader, out := consume(t, d, "c")
		if err := reader.Wait(); err != nil {
			t.Fatalf("consumer: %v", err)
		}
		if batches, _ := readCopies(t, out); countSamples(batches) != 20 {
			t.Fatalf("%d samples, want 20", countSamples(batches))
		}
		want := "; index not written to " + defaultShardIndex(spec, server.Endpoint) + ": "
		if st := readFile(t, filepath.Join(d.dir, "status")); !strings.Contains(st, want) {
			t.Fatalf("status does not say %q:\n%s", want, st)
		}
	})
	t.Run("none", func(t *testing.T) {
		cache := t.TempDir()
		t.Setenv("XDG_CACHE_HOME", cache)
		mountTwice(t, server, spec, shardBytes, "", "--shard-index", "none")
		if left, _ := os.ReadDir(cache); len(left) != 0 {
			t.Fatalf("--shard-index none wrote %v in the cache directory", left)
		}
	})
}

// mountTwice mounts spec twice, one after the other, with args,
// one consumer reading one epoch of each: the first mount reads the
// shards twice (an index pass, then the epoch); the second, where index
// is not "", reads the index file instead and the shards once.
func mountTwice(t *testing.T, server *s3test.Server, spec string, shardBytes int64, index string, args ...string) {
	t.Helper()
	second, secondFate := 2*shardBytes, "none kept (--shard-index none)" // without an index file
	if index != "" {
		second, secondFate = shardBytes, "read from "+index
	}
	firstFate := secondFate
	if index != "" {
		firstFate = "written to " + index
	}
	for k, want := range []int64{2 * shardBytes, second} {
		d := startDaemon(t, append([]string{"--source", spec, "--s3-endpoint", server.Endpoint,
			"--batch-size", "6", "--image-size", "16", "--epochs", "1"}, args...)...)
		reader, out := consume(t, d, "c")
		if err := reader.Wait(); err != nil {
			t.Fatalf("consumer: %v", err)
		}
		batches, _ := readCopies(t, out)
		if n := countSamples(batches); n != 20 {
			t.Fatalf("mount %d: %d samples, want 20", k+1, n)
		}
		var doc statusDoc
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(d.dir, "status.json"))), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Remote == nil || doc.Remote.Bytes != want || doc.Remote.Requests != 6 {
			t.Fatalf("mount %d: remote %+v, want %d bytes (the shards are %d) in 6 requests", k+1, doc.Remote, want, shardBytes)
		}
		// What status says of it: the index file's fate, 3 shards read
		// whole, none read ahead in vain (one epoch, one consumer).
		fate := []string{firstFate, secondFate}[k]
		if sh := doc.Shards; sh == nil || sh.Index != fate || sh.Reads != 3 || sh.ReadBytes != shardBytes || sh.Wasted != 0 || sh.Memory != 512<<20 {
			t.Fatalf("mount %d: status.json shards %+v, want index %q, 3 whole reads of %d bytes", k+1, doc.Shards, fate, shardBytes)
		}
		st := readFile(t, filepath.Join(d.dir, "status"))
		if !strings.Contains(st, "shards: ") || !strings.Contains(st, "; 3 read (") || (fate != "" && !strings.Contains(st, "; index "+fate+"\n")) {
			t.Fatalf("mount %d: status:\n%s", k+1, st)
		}
		if m := readFile(t, filepath.Join(d.dir, "metrics")); !strings.Contains(m, "tsock_shard_piece_reads_total 3\n") {
			t.Fatalf("mount %d: metrics:\n%s", k+1, m)
		}
		d.stop(t)
	}
}

// countSamples is how many samples batches hold.
func countSamples(batches []*batchfile.Batch) int {
	n := 0
	for _, b := range batches {
		n += len(b.Indices)
	}
	return n
}

// shardsInS3 starts a real S3 server holding 20 samples of 2 classes as
// shards of 8, data/train/shard-000.tar to shard-002.tar: the server and
// the same shards' local spec.
func shardsInS3(t *testing.T) (*s3test.Server, string) {
	t.Helper()
	server := s3test.Start(t, "data")
	local := producertest.Shards(t, producertest.Folder(t, 20, 2), 8)
	if err := os.CopyFS(filepath.Join(server.Root, "data", "train"), os.DirFS(filepath.Dir(local))); err != nil {
		t.Fatal(err)
	}
	return server, local
}

// TestAStartingMountSaysWhatItDoesAndStopsOnSIGTERM: while a mount lists
// or indexes its source (here an index pass over a store that does not
// answer), MOUNTPOINT/starting says so and how far it got, `tsock status`
// says it is starting, and SIGTERM ends the daemon there: exit 0, no
// mount and no index file left. Before, nothing was mounted and nothing
// said until the pass ended, and a listing went on past the signal.
func TestAStartingMountSaysWhatItDoesAndStopsOnSIGTERM(t *testing.T) {
	fusetest.Need(t)
	server, _ := shardsInS3(t)
	proxy := s3test.StartProxy(t, server, func(int) s3test.Fault { return s3test.Stall })
	dir, index := t.TempDir(), filepath.Join(t.TempDir(), "train.idx")
	cmd := exec.Command(tsockBinary(t), "mount", dir, "--source", "s3://data/train/shard-{000..002}.tar", "--s3-endpoint", proxy.Endpoint,
		"--shard-index", index)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := startDying(cmd, done); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		syscall.Unmount(dir, syscall.MNT_DETACH)
	})
	waittest.Until(t, "the starting mount's file", func() bool {
		text, _ := os.ReadFile(filepath.Join(dir, "starting"))
		return strings.Contains(string(text), "state: starting") && strings.Contains(string(text), "indexing 3 shards: 0 done")
	})
	if code, out := runCLI(t, "status", dir); code == 0 || !strings.Contains(out, "tsock is starting") {
		t.Fatalf("tsock status while starting: exit %d, %q", code, out)
	}
	for _, name := range []string{"status", "status.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("%s while starting (readiness probes and scripts wait for it): %v", name, err)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM while indexing: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20 s after SIGTERM while indexing\n%s", stderr.String())
	}
	if mounts, _ := os.ReadFile("/proc/self/mounts"); strings.Contains(string(mounts), " "+dir+" ") {
		t.Fatal("a mount was left")
	}
	if _, err := os.Stat(index); !os.IsNotExist(err) {
		t.Fatalf("an index file was written by a pass cut short: %v", err)
	}
}

// TestStatusSaysHowFarTheShuffleReaches: a training mount of class-sorted
// tar shards whose shard memory holds a window of 2 of 6 shards and no
// shard disk says how little a batch mixes, in status and status.json,
// with the knobs that widen it, and warns on the log; the same memory
// with the shard disk sized by default mixes and does not warn; a shard
// memory of 2 shards (too little to read 4 at a time) reads each sample
// alone in a uniform order, and says why; a mount whose window holds
// every shard, and an eval mount, say theirs.
func TestStatusSaysHowFarTheShuffleReaches(t *testing.T) {
	t.Parallel()                                                     // see parallelTests
	spec := producertest.Shards(t, producertest.Folder(t, 24, 6), 4) // 6 shards, of one class each
	_, bytes := producertest.ShardFiles(t, spec)
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(spec), "*.tar"))
	var largest int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			largest = max(largest, st.Size())
		}
	}
	narrow := fmt.Sprint(5 * largest) // 4 of the largest, and a window of 2 shards
	tiny := fmt.Sprint(2 * bytes / 6) // 2 shards: not 4 of them at a time
	for _, tc := range []struct {
		args       []string
		kind, line string
		reach      int // -1: any
		warn       bool
	}{
		{[]string{"--shard-memory", narrow, "--shard-disk", "0"}, "piece window", "shuffle: a batch draws from a window of 2 of 6 pieces of 6 shards (about 8 of 24 samples); a batch of 4 holds ", 8, true},
		{[]string{"--shard-memory", narrow, "--shard-disk-dir", producertest.DiskDir(t)}, "piece window", "; a batch of 4 holds ", -1, false},
		{[]string{"--shard-memory", tiny, "--shard-disk", "0"}, "uniform", "shards: read a sample at a time: the shard memory and disk (", 24, false},
		{nil, "uniform", "shuffle: uniform over all 24 samples", 24, false},
		{[]string{"--transform", "eval"}, "none", "shuffle: none (eval: the dataset's order)", 0, false},
	} {
		d := startDaemon(t, append([]string{"--source", spec, "--batch-size", "4", "--image-size", "8", "--epochs", "1"}, tc.args...)...)
		st := readFile(t, filepath.Join(d.dir, "status"))
		if !strings.Contains(st, tc.line) || strings.Contains(st, "widen the window with --shard-disk") != tc.warn {
			t.Errorf("%v: status lacks %q (or the knob):\n%s", tc.args, tc.line, st)
		}
		var doc statusDoc
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(d.dir, "status.json"))), &doc); err != nil {
			t.Fatal(err)
		}
		if s := doc.Shuffle; s == nil || s.Kind != tc.kind || (tc.reach >= 0 && s.Reach != tc.reach) || s.Samples != 24 || (s.Warning != "") != tc.warn ||
			tc.warn && (s.Batch != 4 || s.Distinct >= 0.9*s.Uniform) {
			t.Errorf("%v: status.json shuffle %+v, want %s reaching %d of 24", tc.args, doc.Shuffle, tc.kind, tc.reach)
		}
		d.stop(t)
		if logged := strings.Contains(d.stderr.String(), "the shuffle mixes less than a uniform one"); logged != tc.warn {
			t.Errorf("%v: warned on the log: %v, want %v", tc.args, logged, tc.warn)
		}
	}
}
