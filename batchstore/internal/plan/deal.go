package plan

// Dealing: the ranks of a group (the data-parallel processes of one
// training) read one list of batches, the group's, whose batches are
// rounds of world × batch size samples; each rank takes its share of
// each round. A round is a run of the group's epoch in the stream's order,
// so each epoch is one fresh order dealt to the ranks, and the global
// batch of a step (the union of the ranks' batches) is a consecutive run
// of that order: it mixes as the stream does.
//
// The uneven tail is dealt as torch's DistributedSampler deals it: every
// rank gets the same number of samples, by padding (repeats of the
// round's own samples, which the buffer still holds, where
// DistributedSampler repeats the epoch's first ones) or, with dropLast,
// by leaving out fewer than world samples. So every rank takes the same
// number of steps an epoch (DDP waits forever on a rank with one more).

// Share is rank's share of round: positions [rank×per, (rank+1)×per) of
// the round's samples, in order, where per is the batch size for a full
// round. A short round (its epoch's last, or one the shell let be short)
// of n samples gives each rank ⌈n/world⌉, positions past n taken again
// from the round's start, or, where it is its epoch's last and dropLast
// is set, ⌊n/world⌋. ok is false where that leaves the rank nothing (then
// it leaves every rank nothing: the round is dropped whole). The share
// keeps the round's Start, End, Epoch and Index: a rank's progress is
// the round's.
func Share(round Batch, rank, world, batchSize int, epochLast, dropLast bool) (share Batch, ok bool) {
	n := int(round.Samples())
	per := batchSize
	if n < world*batchSize {
		per = (n + world - 1) / world
		if epochLast && dropLast {
			per = n / world
		}
	}
	if per == 0 || n == 0 {
		return Batch{}, false
	}
	share = Batch{Start: round.Start, End: round.End, Epoch: round.Epoch, Index: round.Index, Picks: []Span{}}
	spans := round.Spans()
	lo := rank * per
	for p := lo; p < lo+per; {
		// The run of positions from p (mod n) that one span holds.
		q := p % n
		x, rest := at(spans, q)
		take := min(rest, lo+per-p)
		share.Picks = appendSpan(share.Picks, Span{x, x + uint64(take)})
		p += take
	}
	return share, true
}

// at is the global sample at position q of spans, and how many positions
// from q on the same span holds.
func at(spans []Span, q int) (uint64, int) {
	for _, sp := range spans {
		if k := int(sp.To - sp.From); q < k {
			return sp.From + uint64(q), k - q
		} else {
			q -= k
		}
	}
	panic("plan: position past the round's samples") // Share asks only below n
}

// appendSpan adds sp to picks, joining it to the last where they touch.
func appendSpan(picks []Span, sp Span) []Span {
	if k := len(picks); k > 0 && picks[k-1].To == sp.From {
		picks[k-1].To = sp.To
		return picks
	}
	return append(picks, sp)
}

// RoundEndsEpoch says whether round is the last of r's epoch: its end is
// that epoch's end, known.
func RoundEndsEpoch(st Stream, r Reader, round Batch) bool {
	end, known := EpochEnd(st, r, round.Epoch)
	return known && round.End >= end
}
