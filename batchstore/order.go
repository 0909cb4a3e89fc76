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
func StitchOrder(prev []int, splits map[int]int, keep func(index int) bool, shuffle func(piece int, seg []int)) ([]int, map[int]int) {
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
		for _, idx := range prev[cuts[k]:cuts[k+1]] {
			if keep(idx) {
				order = append(order, idx)
			}
		}
		if shuffle != nil {
			shuffle(k, order[start:])
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
		last := c.joinEpoch + s.cfg.Epochs
		switch {
		case e < last:
			return epochLen
		case e == last && c.splitID != 0:
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
