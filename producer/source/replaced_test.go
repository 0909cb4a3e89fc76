package source_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/internal/wds"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// relabel rewrites shard path in place with every label one more: the
// images stay at the offsets indexed, so only a check of the shard's
// version can tell that its samples are no longer those indexed.
func relabel(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	samples, _, err := wds.Index(bytes.NewReader(data))
	if err != nil || len(samples) == 0 {
		t.Fatalf("%d samples in %s: %v", len(samples), path, err)
	}
	for _, smp := range samples {
		// Each .cls member follows its image: its one digit is the first
		// byte after the image's tar padding and the next header.
		at := smp.Offset + (smp.Size+511)/512*512 + 512
		if c := data[at]; c < '0' || c > '8' {
			t.Fatalf("label byte %q at %d", c, at)
		}
		data[at]++
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// madeAfterReplacing indexes spec through open, replaces the second
// shard (its labels changed, its images where they were), then makes one
// epoch: it returns the samples made and the producer's skip reasons.
func madeAfterReplacing(t *testing.T, src source.Source, replace func()) (int, string) {
	t.Helper()
	replace()
	cfg := producertest.Config(src, 4, 1, 1)
	store := batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()*3))
	defer store.Close()
	p, err := producer.New(cfg, store, memfile.NewMemFD())
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	for _, b := range producertest.ProduceWith(t, p, store) {
		made += len(b.Indices)
	}
	return made, strings.Join(p.Stats().Snapshot().RecentSkips, "\n")
}

// TestReplacedShardIsSkippedNotMisread: a shard replaced after it was
// indexed (locally: rewritten in place; in S3: another ETag) has its
// samples skipped and named, never read at the old offsets with stale
// labels; the other shard's samples are all made.
func TestReplacedShardIsSkippedNotMisread(t *testing.T) {
	dir := producertest.Folder(t, 12, 2)
	spec := producertest.Shards(t, dir, 6)
	second := strings.Replace(spec, "{000..001}", "001", 1)
	t.Run("local", func(t *testing.T) {
		src := producertest.OpenShards(t, spec)
		made, skips := madeAfterReplacing(t, src, func() { relabel(t, second) })
		if made != 6 || !strings.Contains(skips, "changed since it was indexed") {
			t.Fatalf("%d samples made, want 6; skips:\n%s", made, skips)
		}
	})
	t.Run("s3", func(t *testing.T) {
		server := s3test.Start(t, "data")
		src, err := source.Open(context.Background(), uploadShards(t, server, "data", spec), source.Options{S3: s3Config(server.Endpoint)})
		if err != nil {
			t.Fatal(err)
		}
		made, skips := madeAfterReplacing(t, src, func() {
			relabel(t, second)
			server.Put(t, "data", "train/"+filepath.Base(second), second)
		})
		if made != 6 || !strings.Contains(skips, "changed since it was indexed") {
			t.Fatalf("%d samples made, want 6; skips:\n%s", made, skips)
		}
	})
}
