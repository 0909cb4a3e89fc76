package source_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// TestWholeShardsAreReadOncePerEpoch: shards in an object store, three
// training epochs: each shard is one GET per epoch (after the index's one
// stream each at open), its bytes once, not a ranged GET per sample; the
// epochs are exact.
func TestWholeShardsAreReadOncePerEpoch(t *testing.T) {
	const n, perShard, epochs = 60, 10, 3
	server := s3test.Start(t, "data")
	dir := producertest.Folder(t, n, 3)
	local := producertest.Shards(t, dir, perShard)
	spec := uploadShards(t, server, "data", local)
	proxy := s3test.StartProxy(t, server, func(int) s3test.Fault { return s3test.Pass })
	src, err := source.OpenContext(context.Background(), spec, s3Config(proxy.Endpoint))
	if err != nil {
		t.Fatal(err)
	}
	shards := n / perShard
	var shardBytes int64
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(local), "*.tar"))
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		shardBytes += st.Size()
	}
	atOpen := len(proxy.Log())
	cfg := producertest.Config(src, 8, epochs, 2)
	batches := producertest.Produce(t, cfg)
	if err := (producertest.Stream{Good: producertest.All(n), Label: src.Label, BatchSize: 8, Epochs: epochs}).Check(batches); err != nil {
		t.Fatal(err)
	}
	gets := proxy.Log()[atOpen:]
	requests, bytes := src.(*source.Shards).WholeReads()
	if len(gets) != epochs*shards || requests != int64(epochs*shards) || bytes != int64(epochs)*shardBytes {
		t.Fatalf("%d epochs of %d shards (%d bytes): %d requests (%d whole, %d bytes); the proxy saw:\n%s",
			epochs, shards, shardBytes, len(gets), requests, bytes, strings.Join(gets, "\n"))
	}
}

// TestShardShuffleIsExactAndSpread: every sample once; the samples of
// each block of window shards come together, in an order that mixes them
// (not shard after shard), and the shards' order differs by seed.
func TestShardShuffleIsExactAndSpread(t *testing.T) {
	const shards, per, window = 40, 25, 4
	shardOf := func(i int) int { return i / per }
	seg := producertest.All(shards * per)
	source.ShardShuffle(rand.New(rand.NewPCG(1, 2)), seg, shardOf, window)
	if !slices.Equal(slices.Sorted(slices.Values(seg)), producertest.All(shards*per)) {
		t.Fatal("not every sample once")
	}
	block := window * per
	runs := 0
	for k := 0; k < len(seg); k += block {
		held := map[int]bool{}
		for _, i := range seg[k:min(k+block, len(seg))] {
			held[shardOf(i)] = true
		}
		if len(held) != window {
			t.Fatalf("block %d holds %d shards, want %d", k/block, len(held), window)
		}
	}
	for k := 1; k < len(seg); k++ {
		if shardOf(seg[k]) == shardOf(seg[k-1]) {
			runs++
		}
	}
	// Shuffled among 4 shards, a neighbour is of the same shard about a
	// quarter of the time; shard after shard, always.
	if runs > len(seg)/2 {
		t.Fatalf("%d of %d neighbours from one shard: the block is not shuffled", runs, len(seg))
	}
	other := producertest.All(shards * per)
	source.ShardShuffle(rand.New(rand.NewPCG(3, 4)), other, shardOf, window)
	if shardOf(other[0]) == shardOf(seg[0]) && shardOf(other[block]) == shardOf(seg[block]) {
		t.Fatal("two seeds start with the same shards")
	}
}
