package plan

// What a consumer still needs, which is what may be freed: a producer
// batch is freed when no active consumer needs it (Needs), some consumer
// consumed it, and no lease is open on it (the shell's counts).

// Progress is where a consumer is: what Needs and LowSample read besides
// its Reader.
type Progress struct {
	Active     bool   // joined, not left, not evicted
	Start      uint64 // its first sample; valid when StartKnown
	StartKnown bool
	// Low is its lowest unconsumed batch, LowBatch that batch where it is
	// computed (LowComputed), Last its last batch computed (HasLast).
	LowBatch    Batch
	LowComputed bool
	Last        Batch
	HasLast     bool
	// PastTheEnd: its lowest unconsumed batch lies past its last epoch.
	PastTheEnd bool
}

// NoneOf says whether the held samples [from, end) hold none of sub:
// the rest of an epoch a consumer has nothing more to read in.
func NoneOf(st Stream, sub Subset, from, end uint64) bool {
	if sub == nil || from >= end {
		return from >= end
	}
	for x := from; x < end; {
		first, bend, indices, ok := st.HeldAt(x)
		if !ok { // freed: nobody had anything left to read in it
			x = st.NextHeld(x, end)
			continue
		}
		if uint64(len(indices)) != bend-first {
			return false
		}
		for ; x < min(end, bend); x++ {
			if sub.Has(int(indices[x-first])) {
				return false
			}
		}
	}
	return true
}

// LowSample is the first sample a consumer may still read.
func LowSample(st Stream, r Reader, p Progress) uint64 {
	if p.LowComputed {
		return p.LowBatch.Start
	}
	if !p.HasLast {
		return p.Start
	}
	last := p.Last
	if end, known := EpochEnd(st, r, 0); r.Split != 0 && last.Epoch == 0 && known && (last.End == end || NoneOf(st, subsetFor(r, 0), last.End, end)) {
		// Its stitched first epoch is read: it goes on at the start of
		// the producer epoch after next, and needs nothing before.
		if start, ok := st.EpochStart(r.JoinEpoch + 2); ok {
			return start
		}
		return max(st.Published(), last.End)
	}
	return last.End
}

// Needs says whether a consumer may still read samples of the held
// producer batch of producer epoch epoch holding samples [first, end).
func Needs(st Stream, r Reader, p Progress, epoch int, first, end uint64) bool {
	switch {
	case !p.Active:
		return false
	case !p.StartKnown:
		// Aligned to an epoch that has not started: it needs only batches
		// of that epoch and later.
		return epoch >= r.JoinEpoch
	case end <= p.Start || end <= LowSample(st, r, p), p.PastTheEnd:
		return false
	}
	if n := st.Epochs(); n > 0 {
		if last, known := EpochEnd(st, r, n-1); known && first >= last {
			return false
		}
	}
	return true
}

func subsetFor(r Reader, k int) Subset {
	if r.SubsetFor == nil {
		return nil
	}
	return r.SubsetFor(k)
}
