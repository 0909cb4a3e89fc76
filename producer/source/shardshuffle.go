package source

import (
	"math/rand/v2"
	"slices"
)

// ShardShuffle orders seg (dataset indices) for reading piece by piece
// (pieceOf: a shard, or a part of one, numbered below pieces; see
// shardpieces.go): its pieces in
// a random order around a circle, and each piece's samples spread at
// random over the `window` buckets from its place, the last pieces'
// wrapping round to the first buckets (MosaicML Streaming's py1e, in
// units of pieces, made circular). Every sample stays exactly once.
//
// Why a circle: on a line, the first buckets draw from the first piece
// alone and the last from the last, so an epoch would begin and end with
// batches of one shard's classes (a quarter of the epoch with a window of
// half the pieces). On the circle every bucket draws from `window`
// pieces; the price is that the pieces that wrap are held from the first
// bucket to the last, so that about 2×window pieces are held at the peak
// (ShuffleWindow sizes the window for it).
//
// The pieces placed where the circle wraps (its last window-1 places,
// and its first) are those seg uses last, in seg's order: where seg is
// the previous epoch's order, they are what that epoch held at its end,
// so an epoch begins with pieces already held rather than waiting for
// window pieces to be read.
//
// The places of each arc (the edge's, the others') are dealt by class (classOf: a piece's class, the
// label most of its samples have): a class's pieces are spread evenly
// around the circle, each class at a random phase, rather than at random
// places. On class-sorted shards a class is a few pieces, and a window
// holds a piece for window/pieces of the epoch: placed at random, its
// pieces bunch and leave the class out of a sixth of the epoch (at
// ImageNet's shape, a quarter of its size); spread evenly they cover it
// as a uniform shuffle does. A class of one piece is placed at random.
//
// The order is made in linear time (but for sorting the places): the
// k-th piece's samples each go to one of the buckets k to k+window-1
// (mod the pieces), at random, and each bucket is shuffled; the buckets,
// in turn, are the order.
func ShardShuffle(rng *rand.Rand, seg []int, pieceOf func(int) int, pieces, window int, classOf func(piece int) int) {
	if len(seg) < 2 {
		return
	}
	place := make([]int32, pieces) // piece → its place on the circle; -1: not in seg
	for p := range place {
		place[p] = -1
	}
	var last []int // the pieces, by when seg uses them last, latest first
	for n := len(seg) - 1; n >= 0; n-- {
		if p := pieceOf(seg[n]); place[p] < 0 {
			place[p] = 0
			last = append(last, p)
		}
	}
	n := len(last)
	window = min(max(window, 1), n)
	edge, middle := last[:window], last[window:]
	rng.Shuffle(len(edge), func(a, b int) { edge[a], edge[b] = edge[b], edge[a] })
	rng.Shuffle(len(middle), func(a, b int) { middle[a], middle[b] = middle[b], middle[a] })
	// Each arc dealt by class: the edge is most of the circle where the
	// window is (a few pieces a class, all held from the epoch before).
	spreadClasses(rng, edge, classOf)
	spreadClasses(rng, middle, classOf)
	// Places: edge[0] at 0, the rest of the edge at the circle's end.
	place[edge[0]] = 0
	for k, p := range edge[1:] {
		place[p] = int32(n - window + 1 + k)
	}
	for k, p := range middle {
		place[p] = int32(1 + k)
	}
	bucket := make([]int32, len(seg))
	start := make([]int, n+1) // bucket b's samples go from start[b]
	for k, i := range seg {
		b := place[pieceOf(i)] + int32(rng.IntN(window))
		if b >= int32(n) {
			b -= int32(n)
		}
		bucket[k] = b
		start[b+1]++
	}
	for b := 1; b < len(start); b++ {
		start[b] += start[b-1]
	}
	out := make([]int, len(seg))
	at := slices.Clone(start)
	for k, i := range seg {
		out[at[bucket[k]]] = i
		at[bucket[k]]++
	}
	for b := range n {
		part := out[start[b]:start[b+1]]
		rng.Shuffle(len(part), func(x, y int) { part[x], part[y] = part[y], part[x] })
	}
	copy(seg, out)
}

// spreadClasses orders pieces (in a random order) so that each class's
// pieces lie evenly apart: the j-th of a class's m pieces at (j+phase)/m
// of the way, phase random for each class; ties keep the random order.
func spreadClasses(rng *rand.Rand, pieces []int, classOf func(int) int) {
	count := map[int]int{}
	for _, p := range pieces {
		count[classOf(p)]++
	}
	phase := map[int]float64{}
	seen := map[int]int{}
	key := make([]float64, len(pieces))
	for k, p := range pieces {
		c := classOf(p)
		ph, ok := phase[c]
		if !ok {
			ph = rng.Float64()
			phase[c] = ph
		}
		key[k] = (float64(seen[c]) + ph) / float64(count[c])
		seen[c]++
	}
	idx := make([]int, len(pieces))
	for k := range idx {
		idx[k] = k
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case key[a] < key[b]:
			return -1
		case key[a] > key[b]:
			return 1
		}
		return 0
	})
	out := make([]int, len(pieces))
	for k, i := range idx {
		out[k] = pieces[i]
	}
	copy(pieces, out)
}
