package source_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/internal/wds"
)

// TestShardsGiveTheFoldersBatches: the same images as WebDataset shards
// and as an ImageFolder give the same batches, byte for byte, for the
// same seed: index, label and pixels alike, through the crop decoder.
func TestShardsGiveTheFoldersBatches(t *testing.T) {
	dir := producertest.Folder(t, 30, 3)
	spec := producertest.Shards(t, dir, 7) // 5 shards, the last short
	folder, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	shards, err := source.Open(context.Background(), spec, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if shards.Len() != 30 || len(shards.Classes()) != 3 || !strings.Contains(shards.Describe(), "5 tar shards") {
		t.Fatalf("%s: %d samples, classes %v", shards.Describe(), shards.Len(), shards.Classes())
	}
	sameBatches(t, folder, shards)
}

// sameBatches: sources a and b give the same batches over two epochs,
// byte for byte: pixels, labels and indices.
func sameBatches(t *testing.T, a, b source.Source) {
	t.Helper()
	// In the same order: shards are shuffled shard by shard for training
	// (ShardShuffle), a folder uniformly.
	ca, cb := producertest.Config(a, 8, 2, 2), producertest.Config(b, 8, 2, 2)
	ca.Transform, cb.Transform = pipeline.Eval, pipeline.Eval
	producertest.EqualBatches(t, producertest.Produce(t, ca), producertest.Produce(t, cb), a.Describe()+" and "+b.Describe())
}

// TestShardsSkipWhatCannotBeRead: a member that is not an image is
// skipped when its sample is made, like a corrupt file; a shard cut short
// keeps the samples before the cut and says what it lost; a spec that
// names no shard fails at open.
func TestShardsSkipWhatCannotBeRead(t *testing.T) {
	dir := producertest.Folder(t, 12, 2)
	spec := producertest.Shards(t, dir, 6)
	last := strings.Replace(spec, "{000..001}", "001", 1)
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	// Cut the second shard inside its third image, and spoil its first.
	idx, _, err := wds.Index(bytes.NewReader(data))
	if err != nil || len(idx) != 6 {
		t.Fatalf("%d samples: %v", len(idx), err)
	}
	copy(data[idx[0].Offset:], "not a JPEG, not any image")
	if err := os.WriteFile(last, data[:idx[2].Offset+10], 0o644); err != nil {
		t.Fatal(err)
	}
	src := producertest.OpenShards(t, spec)
	if src.Len() != 8 || len(src.Skipped()) != 2 {
		t.Fatalf("%d samples, skipped %q; want 8 and the cut one and the rest of the shard", src.Len(), src.Skipped())
	}
	batches := producertest.Produce(t, producertest.Config(src, 4, 1, 1))
	n := 0
	for _, b := range batches {
		n += len(b.Indices)
	}
	if n != 7 {
		t.Fatalf("%d samples made, want 7 (one member is no image)", n)
	}
	for _, bad := range []string{filepath.Join(t.TempDir(), "none-*.tar"), filepath.Join(t.TempDir(), "missing.tar"), "x-{3..1}.tar"} {
		if _, err := source.Open(context.Background(), bad, source.Options{}); err == nil {
			t.Errorf("open %s: no error", bad)
		}
	}
}
