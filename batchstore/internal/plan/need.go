package plan

// What a consumer still needs, which is what may be freed: a producer
// batch is freed when no active consumer needs it (Needs), some consumer
// consumed it, and no lease is open on it (the shell's counts).

// Progress is where a consumer is: what Needs and LowSample read of its
// Reader (the store asks Needs of every consumer for every batch it
// might free: plain values and the consumer's own list, no copies).
type Progress struct {
	Active     bool   // joined, not left, not evicted
	Start      uint64 // its first sample; valid when StartKnown
	StartKnown bool
	Low        uint64     // its lowest unconsumed batch
	Batches    *BatchList // its batches computed so far
	Samples    int        // the dataset's samples, which bound its batch numbers (0: not known)
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
func LowSample(st Stream, r *Reader) uint64 {
	p := &r.Progress
	if b, ok := p.Batches.Get(p.Low); ok {
		return b.Start
	}
	last, ok := p.Batches.Last()
	if !ok {
		return p.Start
	}
	if end, known := EpochEnd(st, *r, 0); r.Split != 0 && last.Epoch == 0 && known && (last.End == end || NoneOf(st, subsetFor(*r, 0), last.End, end)) {
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
// The cheap answers first: the store asks it of every consumer for every
// batch it might free.
func Needs(st Stream, r *Reader, epoch int, first, end uint64) bool {
	p := &r.Progress
	switch {
	case !p.Active:
		return false
	case !p.StartKnown:
		// Aligned to an epoch that has not started: it needs only batches
		// of that epoch and later.
		return epoch >= r.JoinEpoch
	case end <= p.Start || end <= LowSample(st, r):
		return false
	}
	if last, ok := p.Batches.Last(); PastTheEnd(st, *r, p.Samples, p.Low, last, ok, p.Batches.Computed()) {
		return false
	}
	if n := st.Epochs(); n > 0 {
		if last, known := EpochEnd(st, *r, n-1); known && first >= last {
			return false
		}
	}
	return true
}

// subsetFor is r's subset for its epoch k; nil, everything.
func subsetFor(r Reader, k int) Subset {
	if r.Subsets == nil {
		return nil
	}
	return r.Subsets.SubsetFor(k)
}
