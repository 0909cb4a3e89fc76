package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tsock/tsock/producer/producertest"
)

// TestMountServesTarShards: --source with a brace pattern of WebDataset
// shards mounts, serves every sample once per epoch with its label, and
// status names the shards and what their index left out.
func TestMountServesTarShards(t *testing.T) {
	dir := producertest.Folder(t, 20, 2)
	spec := producertest.Shards(t, dir, 8) // 3 shards
	junk := filepath.Join(filepath.Dir(strings.Replace(spec, "{000..002}", "000", 1)), "shard-003.tar")
	if err := os.WriteFile(junk, []byte("not a tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec = strings.Replace(spec, "{000..002}", "{000..003}", 1)
	d := startDaemon(t, "--source", spec, "--batch-size", "6", "--image-size", "16", "--epochs", "1")
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
	if !strings.Contains(st, "(4 tar shards)") || !regexp.MustCompile(`(?m)^left out when the shards were indexed: 1\n  left out: .*shard-003\.tar: the rest of the shard: `).MatchString(st) {
		t.Fatalf("status:\n%s", st)
	}
	d.stop(t)
}
