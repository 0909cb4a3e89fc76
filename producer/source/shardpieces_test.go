package source

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dustin/go-humanize"
)

// indexedShards is an index of shards×per samples of size bytes each, as
// an index pass would leave it (members one after another, 512-byte
// headers between), labelled by label(i); no shard is read.
func indexedShards(shards, per int, size int64, classes int, label func(i int) int) *Shards {
	s := &Shards{paths: make([]string, shards), versions: make([]string, shards), sizes: make([]int64, shards),
		classes: make([]string, classes), memory: DefaultShardMemory, format: tarFormat{}}
	for sh := range shards {
		off := int64(0)
		for k := range per {
			off += 512
			s.samples = append(s.samples, shardSample{offset: off, size: int32(size), shard: int32(sh), label: int32(label(sh*per + k))})
			off += size
		}
		s.sizes[sh] = off + 1024
	}
	s.cut(0)
	return s
}

// bigDisk makes statFree say every directory has free bytes free.
func bigDisk(t *testing.T, free int64) {
	was := statFree
	statFree = func(string) (int64, error) { return free, nil }
	t.Cleanup(func() { statFree = was })
}

// epochMix is the mean number of distinct labels in every batch of two
// epochs ordered as the producer orders them (ShardShuffle over s's
// pieces and window from a uniform order, then from the first epoch's,
// with seeds of their own), the least of the two, and the same for a
// uniform shuffle.
func epochMix(s *Shards, batch int) (got, uniform float64) {
	got, uniform, _, _ = epochSpread(s, batch)
	return got, uniform
}

// epochSpread is epochMix, and the same for evenness: the share of an
// epoch's tenths that hold a label, the least of the two epochs', and a
// uniform shuffle's.
func epochSpread(s *Shards, batch int) (got, uniform, even, uniformEven float64) {
	label := func(i int) int { return int(s.samples[i].label) }
	order := make([]int, len(s.samples))
	for i := range order {
		order[i] = i
	}
	rng := rand.New(rand.NewPCG(7, 7))
	rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	uniform, _ = distinctPerBatch(order, batch, len(s.classes), label)
	uniformEven = evenness(order, len(s.classes), label)
	got, even = float64(batch), 1
	for range 2 {
		ShardShuffle(rng, order, s.Piece, s.Pieces(), s.ShuffleWindow(), s.PieceClass)
		mean, _ := distinctPerBatch(order, batch, len(s.classes), label)
		got, even = min(got, mean), min(even, evenness(order, len(s.classes), label))
	}
	return got, uniform, even, uniformEven
}

// TestClassSortedShardsMixLikeAUniformShuffle: ImageNet's shape at a
// quarter of its size (a class per 1.28 shards, written class after
// class; a batch a quarter of a shard; the shard memory 4.65 shards): at
// the default settings (the shard disk sized by Arrange) a batch holds
// at least 0.9 of the distinct labels a uniform shuffle's does, each label
// is spread over at least 0.9 of the epoch's tenths a uniform shuffle's
// is (a class's pieces dealt evenly around the circle: placed at random,
// a label was missing from 0.15 of the tenths, against none), the pieces
// cost at most one request per 8 MiB and cover every shard's bytes once,
// and what is held fits the memory and disk named. With no disk,
// the shard memory alone mixes a few classes a batch: what the disk buys.
func TestClassSortedShardsMixLikeAUniformShuffle(t *testing.T) {
	const shards, per, size, classes, batch = 320, 250, 110 << 10, 250, 64
	bigDisk(t, 1<<40)
	sorted := func(i int) int { return i * classes / (shards * per) }
	s := indexedShards(shards, per, size, classes, sorted)
	memory := s.sizes[0] * 465 / 100

	if err := s.Arrange(ShardSpace{Memory: memory, Batch: batch}); err != nil {
		t.Fatal(err)
	}
	alone, uniform := epochMix(s, batch)
	t.Logf("shard memory alone (a window of %d pieces): %.1f distinct labels a batch, uniform %.1f", s.ShuffleWindow(), alone, uniform)
	if alone > uniform/2 {
		t.Fatalf("memory alone mixes %.1f of %.1f: the test's shards are not class-sorted", alone, uniform)
	}

	if err := s.Arrange(ShardSpace{Memory: memory, Disk: AutoDisk, DiskDir: localDiskDir(t), Batch: batch}); err != nil {
		t.Fatal(err)
	}
	got, uniform, even, uniformEven := epochSpread(s, batch)
	t.Logf("with the shard disk: %d pieces of %d bytes on average, a window of %d, %d bytes of disk (%.2f of the shards): %.1f distinct labels a batch, uniform %.1f (Arrange's estimate %.1f of %.1f); a label in %.3f of the tenths, uniform %.3f",
		s.Pieces(), s.pieceBytes(), s.ShuffleWindow(), s.disk, float64(s.disk)/float64(shards*s.sizes[0]), got, uniform, s.mix.Distinct, s.mix.Uniform, even, uniformEven)
	if got < 0.9*uniform {
		t.Fatalf("a batch holds %.1f distinct labels, a uniform shuffle's %.1f: under 0.9 of it", got, uniform)
	}
	if even < 0.9*uniformEven {
		t.Fatalf("a label is in %.3f of an epoch's tenths, in a uniform shuffle %.3f: under 0.9 of it", even, uniformEven)
	}
	checkPieces(t, s)
	if need := s.spaceFor(s.ShuffleWindow()); s.disk <= 0 || need > s.memory+s.disk {
		t.Fatalf("the window's %d bytes are not within the shard memory %d and disk %d", need, s.memory, s.disk)
	}
}

// checkPieces: every shard's bytes in pieces once, each at least minPiece
// (or its whole shard), each sample's member within its piece.
func checkPieces(t *testing.T, s *Shards) {
	t.Helper()
	next := make([]int64, len(s.paths))
	var total int64
	for k, p := range s.pieces {
		if p.off != next[p.shard] {
			t.Fatalf("piece %d begins at %d of shard %d, not where the last ended (%d)", k, p.off, p.shard, next[p.shard])
		}
		next[p.shard] = p.off + p.size
		if p.size < minPiece && p.size != s.sizes[p.shard] {
			t.Fatalf("piece %d: %d bytes, under %d, of a shard of %d", k, p.size, minPiece, s.sizes[p.shard])
		}
		total += p.size
	}
	for sh, end := range next {
		if end != s.sizes[sh] {
			t.Fatalf("shard %d's pieces end at %d of its %d bytes", sh, end, s.sizes[sh])
		}
	}
	if max(total/minPiece, int64(len(s.paths))) < int64(len(s.pieces)) {
		t.Fatalf("%d pieces for %d bytes: more than one request per %d bytes", len(s.pieces), total, minPiece)
	}
	for i, smp := range s.samples {
		p := s.pieces[smp.piece]
		if p.shard != smp.shard || smp.offset < p.off || smp.offset+int64(smp.size) > p.off+p.size {
			t.Fatalf("sample %d (shard %d, %d+%d) outside its piece %+v", i, smp.shard, smp.offset, smp.size, p)
		}
	}
}

// TestShuffledShardsNeedNoDisk: shards written in a random order of
// labels mix in the shard memory alone: Arrange keeps them whole and
// takes no disk.
func TestShuffledShardsNeedNoDisk(t *testing.T) {
	const shards, per, size, classes, batch = 320, 250, 110 << 10, 250, 64
	bigDisk(t, 1<<40)
	labels := rand.New(rand.NewPCG(1, 1)).Perm(shards * per)
	s := indexedShards(shards, per, size, classes, func(i int) int { return labels[i] % classes })
	if err := s.Arrange(ShardSpace{Memory: s.sizes[0] * 465 / 100, Disk: AutoDisk, DiskDir: localDiskDir(t), Batch: batch}); err != nil {
		t.Fatal(err)
	}
	if s.disk != 0 || s.Pieces() != shards {
		t.Fatalf("%d bytes of disk and %d pieces of %d shards: want none, and the shards whole", s.disk, s.Pieces(), shards)
	}
	if got, uniform := epochMix(s, batch); got < 0.9*uniform {
		t.Fatalf("%.1f distinct labels a batch against %.1f", got, uniform)
	}
}

// BenchmarkImageNetShapeMix prints what Arrange chooses for ImageNet as
// class-sorted shards (1,282 of 1,000 samples of 110 KiB, a class per
// 1.28 shards, batches of 256) at the default shard memory, with the
// shard disk sized by it, and how an epoch then mixes against a uniform
// shuffle; and the time Arrange takes at open.
func BenchmarkImageNetShapeMix(b *testing.B) {
	const shards, per, size, classes, batch = 1282, 1000, 110 << 10, 1000, 256
	was := statFree
	statFree = func(string) (int64, error) { return 1 << 40, nil }
	defer func() { statFree = was }()
	s := indexedShards(shards, per, size, classes, func(i int) int { return i * classes / (shards * per) })
	for b.Loop() {
		start := time.Now()
		if err := s.Arrange(ShardSpace{Memory: DefaultShardMemory, Disk: AutoDisk, DiskDir: localDiskDir(b), Batch: batch}); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		got, uniform, even, uniformEven := epochSpread(s, batch)
		fmt.Printf("imagenet-shape: %d pieces of %s, window %d, shard disk %s, requests an epoch %d: %.1f distinct labels a batch against %.1f uniform (%.3f); a label in %.3f of an epoch's tenths against %.3f; Arrange took %v\n",
			s.Pieces(), humanize.IBytes(uint64(s.pieceBytes())), s.ShuffleWindow(), humanize.IBytes(uint64(s.disk)), s.Pieces(), got, uniform, got/uniform, even, uniformEven, took.Round(time.Millisecond))
	}
}

// TestPiecesTooLargeForTheMemoryFallBackToAUniformOrder: shards of 20 MiB
// with a shard memory of 1.5 of them and no disk: whole shards cannot be
// held 4 at a time, nor parts of 8 MiB or more, so every sample is read
// alone, and the order is uniform rather than shard by shard; status says
// why. With 2.5 shards of memory, parts can be: read in parts, with a
// window of them.
func TestPiecesTooLargeForTheMemoryFallBackToAUniformOrder(t *testing.T) {
	const shards, per, size = 8, 20, 1 << 20
	s := indexedShards(shards, per, size, 1, func(int) int { return 0 }) // no labels to judge by
	s.Arrange(ShardSpace{Memory: s.sizes[0] * 3 / 2, Batch: 8})
	if s.ShuffleWindow() != 0 || s.Alone() == "" || s.Stats().Alone == "" {
		t.Fatalf("1.5 shards of memory: window %d, alone %q: want samples read alone in a uniform order, and why", s.ShuffleWindow(), s.Alone())
	}
	s.Arrange(ShardSpace{Memory: s.sizes[0] * 5 / 2, Batch: 8})
	if s.ShuffleWindow() == 0 || s.Alone() != "" || s.Pieces() <= shards {
		t.Fatalf("2.5 shards of memory: window %d of %d pieces, alone %q: want parts, a window of them", s.ShuffleWindow(), s.Pieces(), s.Alone())
	}
	checkPieces(t, s)
}
