package batchstore

import (
	"context"
	"sort"
)

// StitchOrder orders a producer epoch from the previous epoch's order
// prev: a consumer that joined at order position s of the previous epoch
// saw everything after s, so the samples before s must come first in
// this one. With several such splits prev is cut at each of them and
// each piece is shuffled on its own (shuffle gets the piece's number),
// so every split's prefix set is kept. Samples keep refuses are dropped.
// It returns the order and each split's output position in it.
//
// wanted says which of the dataset's n samples some consumer's subset
// holds (nil: all of them): the others are left out, and one wanted but
// not in prev (a subset that grew) goes into the first piece, which comes
// before every split's end, so that every consumer meets it in its
// current epoch.
func StitchOrder(prev []int, n int, splits map[int]int, keep, wanted func(index int) bool, shuffle func(piece int, seg []int)) ([]int, map[int]int) {
	if wanted == nil {
		wanted = func(int) bool { return true }
	}
	var added []int
	if n > 0 {
		in := make([]bool, n)
		for _, idx := range prev {
			if idx >= 0 && idx < n {
				in[idx] = true
			}
		}
		for idx := range n {
			if !in[idx] && wanted(idx) && keep(idx) {
				added = append(added, idx)
			}
		}
	}
	cuts := []int{0, len(prev)}
	for _, pos := range splits {
		cuts = append(cuts, min(max(pos, 0), len(prev)))
	}
	sort.Ints(cuts)
	order := make([]int, 0, len(prev))
	outAt := map[int]int{}
	for k := 0; k+1 < len(cuts); k++ {
		if cuts[k] == cuts[k+1] {
			continue
		}
		outAt[cuts[k]] = len(order)
		start := len(order)
		if k == 0 {
			order = append(order, added...)
			added = nil
		}
		for _, idx := range prev[cuts[k]:cuts[k+1]] {
			if keep(idx) && wanted(idx) {
				order = append(order, idx)
			}
		}
		if shuffle != nil {
			shuffle(k, order[start:])
		}
	}
	if len(added) > 0 { // prev was empty: there was no first piece
		start := len(order)
		order = append(order, added...)
		if shuffle != nil {
			shuffle(0, order[start:])
		}
	}
	outAt[len(prev)] = len(order)
	out := make(map[int]int, len(splits))
	for id, pos := range splits {
		out[id] = outAt[min(max(pos, 0), len(prev))]
	}
	return order, out
}

// NeedUpTo blocks until some consumer needs order position from of
// producer epoch e, then returns the end of the run of positions from
// there that are needed now (at most epochLen): what an outside producer
// should make next.
func (s *Store) NeedUpTo(ctx context.Context, e, from, epochLen int) (int, error) {
	if err := s.WaitNeed(ctx, e, from); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return min(s.needBound(e, epochLen), epochLen), nil
}

// needBound is the first position of epoch e (of epochLen) that no
// consumer needs now: needed is true below it and false from it on.
// Callers hold s.mu.
func (s *Store) needBound(e, epochLen int) int {
	if s.cfg.Epochs == 0 || e < s.cfg.Epochs {
		return epochLen
	}
	bound := 0
	for _, c := range s.consumers {
		if !c.active() {
			continue
		}
		// Its last epoch: producer epoch joinEpoch+Epochs-1, or, after a
		// stitched first epoch, the one after; a stitched first epoch
		// that is its only one ends at its split in joinEpoch+1.
		last := c.joinEpoch + s.cfg.Epochs
		partial := c.splitID != 0 && s.cfg.Epochs == 1
		if c.splitID != 0 && !partial {
			last++
		}
		switch {
		case e < last:
			return epochLen
		case e == last && partial:
			bpos, planned := s.epochs[e].boundaryOf(c.splitID)
			if !planned {
				return epochLen
			}
			b := s.cfg.BatchSize
			bound = max(bound, (bpos+b-1)/b*b)
		}
	}
	return bound
}
