package batchstore

import (
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
