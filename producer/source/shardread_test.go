package source_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// streaming sets src's shard memory to 4 of the largest of the local
// shards that spec names: enough to read each whole, too little to hold
// more than 2 across an epoch's end (half the budget), as a dataset far
// larger than the memory is read. It returns the budget.
func streaming(tb testing.TB, src source.Source, spec string) int64 {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(spec), "*.tar"))
	var largest int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			tb.Fatal(err)
		}
		largest = max(largest, st.Size())
	}
	src.(*source.Shards).ShardMemory(4 * largest)
	return 4 * largest
}

// s3Shards puts n samples of 3 classes as shards of perShard into a
// real S3 server behind a proxy that passes everything: the server, the
// local shards' spec, their s3:// spec and the proxy.
func s3Shards(t *testing.T, n, perShard int) (server *s3test.Server, local, spec string, proxy *s3test.Proxy) {
	t.Helper()
	server = s3test.Start(t, "data")
	local = producertest.Shards(t, producertest.Folder(t, n, 3), perShard)
	spec = uploadShards(t, server, "data", local)
	return server, local, spec, s3test.StartProxy(t, server, func(int) s3test.Fault { return s3test.Pass })
}

// TestWholeShardsAreReadOncePerEpoch: shards in an object store, three
// training epochs: each shard is one GET per epoch at most (after the
// index's one stream each at open), not a ranged GET per sample; the
// shards the next epoch begins with are kept across the epoch's end, not
// read again; a dataset that fits half the shard memory is read once for
// every epoch. The epochs are exact.
func TestWholeShardsAreReadOncePerEpoch(t *testing.T) {
	const n, perShard, epochs = 60, 10, 3
	_, local, spec, proxy := s3Shards(t, n, perShard)
	shards, shardBytes := producertest.ShardFiles(t, local)
	for _, mode := range []string{"fits", "streaming", "cached"} {
		opened, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(proxy.Endpoint)})
		if err != nil {
			t.Fatal(err)
		}
		src := opened
		switch mode {
		case "streaming":
			streaming(t, opened, local)
		case "cached":
			streaming(t, opened, local)
			src = producertest.Cache(t, opened, 1<<30, "")
		}
		fits := mode != "streaming"
		atOpen := len(proxy.Log())
		cfg := producertest.Config(src, 8, epochs, 2)
		batches := producertest.Produce(t, cfg)
		if err := (producertest.Stream{Good: producertest.All(n), Label: src.Label, BatchSize: 8, Epochs: epochs}).Check(batches); err != nil {
			t.Fatal(err)
		}
		gets, heads := byMethod(proxy.Log()[atOpen:], " GET "), byMethod(proxy.Log()[atOpen:], " HEAD ")
		st := opened.(*source.Shards).Stats()
		requests, bytes := st.Reads, st.ReadBytes
		// What is held across an epoch (kept, cached) is checked once an
		// epoch, a HEAD a shard at most: never a request a sample.
		if len(heads) > epochs*shards {
			t.Fatalf("%s: %d HEADs for %d epochs of %d shards:\n%s", mode, len(heads), epochs, shards, strings.Join(heads, "\n"))
		}
		// Fitting: each shard once. Streaming: each epoch reads each shard
		// once at most, and the later ones all but the (up to 2) it began
		// with, kept from the one before.
		most, least := int64(shards), int64(shards)
		if !fits {
			most, least = int64(epochs*shards), int64(epochs*shards-2*(epochs-1))
		}
		kept, wasted := opened.(*source.Shards).Carried()
		if !fits && (kept != 2*(epochs-1) || wasted != 0) {
			t.Fatalf("streaming: %d shards carried by the later epochs' plans (want the 2 each begins with, read ahead or kept), %d read ahead in vain (want 0: no consumer joined)", kept, wasted)
		}
		if int64(len(gets)) != requests || requests < least || requests > most || (fits && bytes != shardBytes) {
			t.Fatalf("%s: %d epochs of %d shards (%d bytes): %d requests (%d whole, %d bytes), want %d to %d; the proxy saw:\n%s",
				mode, epochs, shards, shardBytes, len(gets), requests, bytes, least, most, strings.Join(gets, "\n"))
		}
		t.Logf("%s: %d requests, %d bytes for %d epochs of %d shards", mode, requests, bytes, epochs, shards)
	}
}

// TestTheNextEpochBeginsReadAhead: once an epoch has asked for all its
// shards, the shards the next is expected to begin with are read ahead
// (or kept): the next epoch's first shards cost no request when it
// begins, so that no epoch begins by waiting a store's first byte. A
// wrong guess is counted, and costs no sample.
func TestTheNextEpochBeginsReadAhead(t *testing.T) {
	const n, perShard = 60, 10
	_, local, spec, proxy := s3Shards(t, n, perShard)
	src, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(proxy.Endpoint)})
	if err != nil {
		t.Fatal(err)
	}
	shards := src.(*source.Shards)
	streaming(t, src, local)
	// Shard after shard, so that the next epoch's first 20 samples are
	// of its first 2 shards, what half the budget holds.
	order := func(seed uint64) []int {
		o := producertest.All(n)
		source.ShardShuffle(rand.New(rand.NewPCG(seed, 1)), o, shards.Piece, shards.Pieces(), 1, shards.PieceClass)
		return o
	}
	first, second := order(1), order(2)
	shards.Schedule(first, second)
	defer shards.Schedule(nil, nil)
	var scratch []byte
	for _, i := range first {
		if _, err := shards.Encoded(context.Background(), i, &scratch); err != nil {
			t.Fatal(err)
		}
	}
	waittest.Until(t, "the next epoch's first 2 shards held", func() bool { held, _, reading, _ := shards.Held(); return held == 2 && reading == 0 })
	before := len(proxy.Log())
	shards.Schedule(second, nil)
	for _, i := range second[:2*perShard] {
		if _, err := shards.Encoded(context.Background(), i, &scratch); err != nil {
			t.Fatal(err)
		}
	}
	// The epoch reads its later shards ahead now; its first two, never.
	firstTwo := map[string]bool{}
	for _, i := range second[:2*perShard] {
		firstTwo[fmt.Sprintf("shard-%03d.tar", shards.Shard(i))] = true
	}
	for _, line := range byMethod(proxy.Log()[before:], " GET ") {
		for name := range firstTwo {
			if strings.Contains(line, name) {
				t.Fatalf("the next epoch's first shards were read when it began: %s", line)
			}
		}
	}
	if kept, wasted := shards.Carried(); kept != 2 || wasted != 0 {
		t.Fatalf("%d shards carried, %d read ahead in vain; want 2 and 0", kept, wasted)
	}

	// A guess gone wrong (the next epoch stitched for a joiner, say): what
	// was read ahead for it is dropped and counted, and the epoch is whole.
	third := order(3)
	shards.Schedule(second[2*perShard:], third)
	for _, i := range second[2*perShard:] {
		if _, err := shards.Encoded(context.Background(), i, &scratch); err != nil {
			t.Fatal(err)
		}
	}
	waittest.Until(t, "the guessed epoch's first 2 shards held", func() bool { held, _, reading, _ := shards.Held(); return held == 2 && reading == 0 })
	other := slices.Clone(third)
	slices.Reverse(other)
	shards.Schedule(other, nil)
	if _, wasted := shards.Carried(); wasted == 0 {
		t.Fatal("shards read ahead for an epoch that began otherwise were not counted")
	}
	for _, i := range other {
		if b, err := shards.Encoded(context.Background(), i, &scratch); err != nil || len(b) == 0 {
			t.Fatalf("sample %d of the epoch that began otherwise: %v", i, err)
		}
	}
}

// TestShardShuffleIsExactAndSpread: every sample once; a shard's samples
// lie within an arc of window+1 shards' worth of the circular order (what
// bounds the memory it is held in), no more than 2×window-1 shards are
// under way at any point, they end one after another, the order mixes
// them (not shard after shard) at its edges too, the next epoch begins
// with the shards this one ended with, and the shards' order differs by
// seed.
func TestShardShuffleIsExactAndSpread(t *testing.T) {
	const shards, per, window = 40, 25, 4
	shardOf := func(i int) int { return i / per }
	seg := producertest.All(shards * per)
	source.ShardShuffle(rand.New(rand.NewPCG(1, 2)), seg, shardOf, shards, window, eachItsOwn)
	if !slices.Equal(slices.Sorted(slices.Values(seg)), producertest.All(shards*per)) {
		t.Fatal("not every sample once")
	}
	at := map[int][]int{}
	for pos, i := range seg {
		at[shardOf(i)] = append(at[shardOf(i)], pos)
	}
	for sh, pos := range at {
		if arc := circularArc(pos, len(seg)); arc > (window+1)*per {
			t.Fatalf("shard %d spans an arc of %d positions, more than %d shards' worth", sh, arc, window+1)
		}
	}
	open, most := 0, 0
	for pos, i := range seg {
		if at[shardOf(i)][0] == pos {
			open++
		}
		most = max(most, open)
		if slices.Max(at[shardOf(i)]) == pos {
			open--
		}
	}
	if most > 2*window-1 {
		t.Fatalf("%d shards under way at once, window %d", most, window)
	}
	// Shards end one after another (each gives its memory back for the
	// next read), not a window of them at once then none for a while.
	var ends []int
	for _, pos := range at {
		ends = append(ends, slices.Max(pos))
	}
	slices.Sort(ends)
	for k := 1; k < len(ends); k++ {
		if gap := ends[k] - ends[k-1]; gap > 2*per {
			t.Fatalf("no shard ends for %d positions (after position %d): shards end in bursts", gap, ends[k-1])
		}
	}
	runs := 0
	for k := 1; k < len(seg); k++ {
		if shardOf(seg[k]) == shardOf(seg[k-1]) {
			runs++
		}
	}
	// Spread over 4 shards' span, a neighbour is of the same shard about
	// a quarter of the time; shard after shard, always.
	if runs > len(seg)/2 {
		t.Fatalf("%d of %d neighbours from one shard: not mixed", runs, len(seg))
	}
	// The edges mix like the middle: on a line, the first and last
	// batches would draw from one shard.
	for _, edge := range [][]int{seg[:per], seg[len(seg)-per:]} {
		if n := distinctOf(edge, shardOf); n < window-1 {
			t.Fatalf("a batch at the epoch's edge draws from %d shards, window %d", n, window)
		}
	}
	// The next epoch, shuffled from this one's order, begins with the
	// shards this one ended with (held: no wait for reads).
	tail := map[int]bool{}
	for k := len(seg) - 1; len(tail) < window; k-- {
		tail[shardOf(seg[k])] = true
	}
	next := slices.Clone(seg)
	source.ShardShuffle(rand.New(rand.NewPCG(1, 3)), next, shardOf, shards, window, eachItsOwn)
	for _, i := range next[:per/3] {
		if !tail[shardOf(i)] {
			t.Fatalf("the next epoch begins with shard %d, not one of the %d this one ended with", shardOf(i), window)
		}
	}
	other := producertest.All(shards * per)
	source.ShardShuffle(rand.New(rand.NewPCG(3, 4)), other, shardOf, shards, window, eachItsOwn)
	if slices.Equal(other, seg) || shardOf(other[0]) == shardOf(seg[0]) && shardOf(other[len(other)-1]) == shardOf(seg[len(seg)-1]) {
		t.Fatal("two seeds give the same order of shards")
	}
}

// circularArc is the shortest arc of a circle of n positions that holds
// pos (sorted): n less the widest gap between neighbours.
func circularArc(pos []int, n int) int {
	gap := pos[0] + n - pos[len(pos)-1]
	for k := 1; k < len(pos); k++ {
		gap = max(gap, pos[k]-pos[k-1])
	}
	return n - gap
}

// distinctOf is how many shards samples are of.
func distinctOf(samples []int, shardOf func(int) int) int {
	seen := map[int]bool{}
	for _, i := range samples {
		seen[shardOf(i)] = true
	}
	return len(seen)
}

// TestSlowDownPacesAndNeverFails: a store that serves 12 requests a
// second and answers 503 SlowDown past that, read a sample per request
// by a fetcher with 16 in flight (so that its first 16 are over the rate
// however slow the machine: at 100 a second, a race-built run beside
// three other packages sent too few to be throttled at all): the run
// ends with exact epochs, the
// throttling counted and paced, no request failed; with whole shards
// the same data costs a few requests and is not throttled at all.
func TestSlowDownPacesAndNeverFails(t *testing.T) {
	const n, perShard = 60, 20
	_, _, spec, proxy := s3Shards(t, n, perShard)
	for _, whole := range []bool{false, true} {
		src, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(proxy.Endpoint)})
		if err != nil {
			t.Fatal(err)
		}
		shards := src.(*source.Shards)
		if !whole {
			shards.ShardMemory(0)
		}
		proxy.LimitRate(12) // counted afresh: the per-sample phase's last second is not the whole shards'
		before := proxy.Injected[s3test.SlowDown].Load()
		cfg := producertest.Config(src, 8, 2, 2)
		cfg.Fetch = 16
		if err := (producertest.Stream{Good: producertest.All(n), Label: src.Label, BatchSize: 8, Epochs: 2}).Check(producertest.Produce(t, cfg)); err != nil {
			t.Fatalf("whole shards %v: %v", whole, err)
		}
		proxy.LimitRate(0)
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
			source.ShardShuffle(rand.New(rand.NewPCG(1, 1)), order, func(i int) int { return i / per }, shards, w, eachItsOwn)
			d, s := shuffleQuality(order, per, batch)
			fmt.Printf("shuffle-quality window-%d %.1f %.4f\n", w, d, s)
		}
	}
}

// byMethod is the lines of a proxy's log of one method (" GET ").
func byMethod(log []string, method string) []string {
	var out []string
	for _, line := range log {
		if strings.Contains(line, method) {
			out = append(out, line)
		}
	}
	return out
}

// eachItsOwn makes every piece a class of its own: ShardShuffle places
// them at random.
func eachItsOwn(p int) int { return p }
