package producer

import (
	"math/rand/v2"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/source"
)

// fixOrder fixes epoch e's order in the store, atomically with joins, and
// returns it. prev is epoch e-1's order (nil before epoch 0).
func (p *Producer) fixOrder(e int, prev []int) []int {
	var order []int
	p.store.FixOrder(e, func(splits map[int]int, wanted func(int) bool) map[int]int {
		var out map[int]int
		order, out = p.orderWithSplits(e, prev, splits, wanted)
		return out
	})
	if sh, ok := source.As[source.Sharded](p.cfg.Source); ok {
		sh.Schedule(p.toRead(order), p.toRead(p.expectNext(e, order)))
	}
	return order
}

// expectNext is how epoch e+1 will begin if nothing changes meanwhile
// (no consumer joins mid-epoch, none changes its subset): the shards read
// ahead for it. A wrong guess costs the bytes read ahead, never a sample.
// nil after the last epoch (past --epochs, unless a late joiner's
// epochs reach past it), and where epoch e+1 cannot be guessed from what
// is known now: a cache in front may hold all of it after epoch 0.
func (p *Producer) expectNext(e int, order []int) []int {
	last := p.cfg.Epochs > 0 && e+1 >= p.cfg.Epochs && !p.store.Needs(e+1)
	if _, cached := p.cfg.Source.(source.Cached); (cached && e == 0) || last {
		return nil
	}
	next, _ := batchstore.StitchOrder(order, 0, nil, func(idx int) bool { return !p.stats.excluded(idx) }, nil, p.shuffler(e+1))
	return next
}

// toRead is what of order the source is asked for: a cache in front
// serves what it holds.
func (p *Producer) toRead(order []int) []int {
	c, ok := p.cfg.Source.(source.Cached)
	if !ok || order == nil {
		return order
	}
	out := make([]int, 0, len(order))
	for _, i := range order {
		if !c.Holds(i) {
			out = append(out, i)
		}
	}
	return out
}

// orderWithSplits is "stitching": a consumer that joined at order position
// s of the previous epoch saw everything after s, so the samples before s
// must come first in this epoch, shuffled among themselves. With several
// such splits the previous order is cut at each of them, and each piece
// is shuffled on its own: every split's prefix set is kept. Known-bad
// samples, and those no consumer's subset holds (wanted), are dropped.
// It returns the order and each split's output position in it.
func (p *Producer) orderWithSplits(e int, prev []int, splits map[int]int, wanted func(int) bool) ([]int, map[int]int) {
	if prev == nil {
		prev = make([]int, p.cfg.Source.Len())
		for i := range prev {
			prev[i] = i
		}
		if sh, ok := source.As[source.Sharded](p.cfg.Source); ok && sh.ShuffleWindow() > 0 && p.cfg.Transform == pipeline.Train {
			// ShardShuffle begins an epoch with the pieces the one before
			// used last; the first, with pieces at random rather than the
			// dataset's last ones (on class-sorted shards, its last classes).
			rand.New(rand.NewPCG(p.cfg.Seed, 0x6669727374)).Shuffle(len(prev), func(i, j int) { prev[i], prev[j] = prev[j], prev[i] })
		}
	}
	return batchstore.StitchOrder(prev, p.cfg.Source.Len(), splits, func(idx int) bool { return !p.stats.excluded(idx) }, wanted, p.shuffler(e))
}

// shuffler shuffles each piece of epoch e's order: nil where the
// transform keeps the dataset's order (evaluation).
func (p *Producer) shuffler(e int) func(k int, seg []int) {
	if p.cfg.Transform != pipeline.Train {
		return nil
	}
	sharded, ok := source.As[source.Sharded](p.cfg.Source)
	window := 0
	if ok {
		window = sharded.ShuffleWindow()
	}
	return func(k int, seg []int) {
		rng := rand.New(rand.NewPCG(p.cfg.Seed, uint64(e)<<24^uint64(k)^0x5368756666))
		if window > 0 { // a uniform order would read every shard at once
			source.ShardShuffle(rng, seg, sharded.Piece, sharded.Pieces(), window, sharded.PieceClass)
			return
		}
		rng.Shuffle(len(seg), func(i, j int) { seg[i], seg[j] = seg[j], seg[i] })
	}
}
