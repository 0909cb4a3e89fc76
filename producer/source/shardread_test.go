package source_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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
	shards, shardBytes := shardFiles(t, local)
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

// TestSlowDownPacesAndNeverFails: a store that serves 100 requests a
// second and answers 503 SlowDown past that, read a sample per request
// by a fetcher with 16 in flight: the run ends with exact epochs, the
// throttling counted and paced, no request failed; with whole shards
// the same data costs a few requests and is not throttled at all.
func TestSlowDownPacesAndNeverFails(t *testing.T) {
	const n, perShard = 60, 20
	server := s3test.Start(t, "data")
	dir := producertest.Folder(t, n, 3)
	spec := uploadShards(t, server, "data", producertest.Shards(t, dir, perShard))
	proxy := s3test.StartProxy(t, server, func(int) s3test.Fault { return s3test.Pass })
	for _, whole := range []bool{false, true} {
		src, err := source.OpenContext(context.Background(), spec, s3Config(proxy.Endpoint))
		if err != nil {
			t.Fatal(err)
		}
		shards := src.(*source.Shards)
		if !whole {
			shards.ShardMemory(0)
		}
		proxy.RateLimit.Store(100)
		before := proxy.Injected[s3test.SlowDown].Load()
		cfg := producertest.Config(src, 8, 2, 2)
		cfg.Fetch = 16
		if err := (producertest.Stream{Good: producertest.All(n), Label: src.Label, BatchSize: 8, Epochs: 2}).Check(producertest.Produce(t, cfg)); err != nil {
			t.Fatalf("whole shards %v: %v", whole, err)
		}
		proxy.RateLimit.Store(0)
		slowed := proxy.Injected[s3test.SlowDown].Load() - before
		st := &shards.Store().Stats
		t.Logf("whole shards %v: %s; %d SlowDown", whole, shards.Remote(), slowed)
		switch {
		case st.Failures.Load() != 0:
			t.Errorf("whole shards %v: %d requests failed", whole, st.Failures.Load())
		case !whole && (slowed == 0 || st.Throttled.Load() != slowed || !strings.Contains(shards.Remote(), "throttled")):
			t.Errorf("per sample: %d SlowDown injected, %d counted: %s", slowed, st.Throttled.Load(), shards.Remote())
		case whole && slowed != 0:
			t.Errorf("whole shards: %d SlowDown for %d shards", slowed, n/perShard)
		}
	}
}

// shuffleQuality measures an epoch's order of shards×per samples (sample
// i in shard i/per): the mean number of distinct shards in a batch of
// batch consecutive samples, and the mean spread of a shard's samples in
// the epoch (last position minus first, over the epoch's length).
func shuffleQuality(order []int, per, batch int) (distinct, spread float64) {
	first, last := map[int]int{}, map[int]int{}
	for pos, i := range order {
		sh := i / per
		if _, ok := first[sh]; !ok {
			first[sh] = pos
		}
		last[sh] = pos
	}
	for sh, f := range first {
		spread += float64(last[sh]-f) / float64(len(order)-1)
	}
	spread /= float64(len(first))
	batches := 0
	for k := 0; k+batch <= len(order); k += batch {
		seen := map[int]bool{}
		for _, i := range order[k : k+batch] {
			seen[i/per] = true
		}
		distinct += float64(len(seen))
		batches++
	}
	return distinct / float64(batches), spread
}

// BenchmarkShardShuffleQuality prints how well ShardShuffle mixes
// ImageNet's shape (1,282 shards of 1,000) for blocks of 1 to 32 shards,
// against a uniform permutation: distinct shards in a batch of 256, and
// the spread of a shard's samples in the epoch.
func BenchmarkShardShuffleQuality(b *testing.B) {
	const shards, per, batch = 1282, 1000, 256
	for b.Loop() {
		uniform := producertest.All(shards * per)
		rand.New(rand.NewPCG(1, 1)).Shuffle(len(uniform), func(i, j int) { uniform[i], uniform[j] = uniform[j], uniform[i] })
		d, s := shuffleQuality(uniform, per, batch)
		fmt.Printf("shuffle-quality uniform %.1f %.4f\n", d, s)
		for _, w := range []int{1, 2, 4, 8, 32} {
			order := producertest.All(shards * per)
			source.ShardShuffle(rand.New(rand.NewPCG(1, 1)), order, func(i int) int { return i / per }, w)
			d, s := shuffleQuality(order, per, batch)
			fmt.Printf("shuffle-quality window-%d %.1f %.4f\n", w, d, s)
		}
	}
}
