package plan

// Stream is the producer's stream as the planner reads it: the store's
// state, read only for one call (the shell holds its lock).
type Stream interface {
	// EpochStart is the global sample where producer epoch e starts,
	// once known.
	EpochStart(e int) (uint64, bool)
	// SplitEnd is the global sample where split's epochs end in producer
	// epoch e (the samples the split missed, put first in that epoch,
	// end there), once known.
	SplitEnd(e, split int) (uint64, bool)
	// Published is how many samples have been published.
	Published() uint64
	// HeldAt is the held producer batch holding global sample x: its
	// first sample, its end, and its samples' dataset indices (nil where
	// it has none); ok is false where it is not held (freed).
	HeldAt(x uint64) (first, end uint64, indices []int32, ok bool)
	// NextHeld is the first global sample at or after x, below limit,
	// that a held batch holds; limit if none.
	NextHeld(x, limit uint64) uint64
	// Epochs is how many epochs each consumer reads; 0: forever.
	Epochs() int
}

// Subset is a consumer's data: which dataset indices it reads.
type Subset interface{ Has(index int) bool }

// Subsets are a consumer's subset for each of its own epochs (one set
// while reading applies from a later epoch): nil, everything.
type Subsets interface{ SubsetFor(k int) Subset }

// Reader is a consumer as the planner reads it.
type Reader struct {
	JoinEpoch int // the producer epoch its first epoch starts in
	Split     int // its split, 0 when aligned to producer epochs
	BatchSize int
	// Subsets are its subset for each of its epochs; nil: everything,
	// always. (An interface a consumer's pointer fills, not a func: the
	// store asks for a Reader per consumer per freed batch, and a method
	// value would be allocated each time.)
	Subsets Subsets
	// AllowShort: the shell found it stuck (the producer waits for room
	// only its reading can make): a short batch of what is held rather
	// than a deadlock.
	AllowShort bool
	// Progress is where it is (Needs and LowSample read it; Next does
	// not): one view, built once, passed by pointer where it is asked
	// most.
	Progress
}

// EpochEnd is the global sample where r's own epoch k ends, if known. A
// consumer that joined mid-epoch (a split) has a stitched first epoch,
// from its join to its split's end in the next producer epoch; each later
// epoch of its is a whole producer epoch, the one after that.
func EpochEnd(st Stream, r Reader, k int) (uint64, bool) {
	switch {
	case r.Split != 0 && k > 0:
		return st.EpochStart(r.JoinEpoch + k + 2)
	case r.Split != 0:
		return st.SplitEnd(r.JoinEpoch+1, r.Split)
	}
	return st.EpochStart(r.JoinEpoch + k + 1)
}

// Next fills b, the batch of r's that starts at b.Start in its own epoch
// b.Epoch (or a later one, if that one is over or has none of r's samples
// left). short says the batch is a short one AllowShort made.
func Next(st Stream, r Reader, b *Batch) (state Resolved, short bool) {
	for {
		end, endKnown := EpochEnd(st, r, b.Epoch)
		for endKnown && b.Start >= end { // this epoch is over, or empty: the next one
			b.Epoch, b.Index = b.Epoch+1, 0
			if n := st.Epochs(); n > 0 && b.Epoch >= n {
				return PastEnd, false
			}
			if r.Split != 0 { // past its stitched first epoch: whole producer epochs
				start, known := st.EpochStart(r.JoinEpoch + b.Epoch + 1)
				if !known {
					return UnknownYet, false
				}
				b.Start = max(b.Start, start)
			}
			end, endKnown = EpochEnd(st, r, b.Epoch)
		}
		if sub := subsetFor(r, b.Epoch); sub != nil {
			if state, short := pick(st, r, b, sub, end, endKnown); state != PastEnd {
				return state, short
			}
			continue // none of its subset left in this epoch: b.Start is its end
		}
		b.End = b.Start + uint64(r.BatchSize)
		if endKnown {
			b.End = min(b.End, end)
		}
		// Where the epoch's end is not known yet, it cannot come before
		// what is published: wait for more.
		if b.End > st.Published() {
			return UnknownYet, false
		}
		return Known, false
	}
}

// pick fills b, which starts at b.Start in r's own epoch b.Epoch (ending
// at end, if endKnown), with the next samples of sub: a full batch, or
// what is left of the epoch. It says Known when b is done, UnknownYet
// when more must be published first, and PastEnd when the rest of the
// epoch holds none of sub (b.Start is then its end).
func pick(st Stream, r Reader, b *Batch, sub Subset, end uint64, endKnown bool) (Resolved, bool) {
	limit := st.Published()
	if endKnown {
		limit = min(limit, end)
	}
	b.Picks = b.Picks[:0]
	got := 0
	x := b.Start
	for x < limit && got < r.BatchSize {
		first, bend, indices, ok := st.HeldAt(x)
		if !ok { // freed: the rest of a stitched epoch that holds none of sub
			x = st.NextHeld(x, limit)
			continue
		}
		if uint64(len(indices)) != bend-first {
			break // without indices (refused when the subset was set)
		}
		to := min(limit, bend)
		for ; x < to && got < r.BatchSize; x++ {
			if !sub.Has(int(indices[x-first])) {
				continue
			}
			if n := len(b.Picks); n > 0 && b.Picks[n-1].To == x {
				b.Picks[n-1].To++
			} else {
				b.Picks = append(b.Picks, Span{x, x + 1})
			}
			got++
		}
	}
	b.End = x
	switch {
	case got == r.BatchSize, endKnown && x == end && got > 0:
		return Known, false
	case endKnown && x == end:
		b.Start = end
		return PastEnd, false
	case got > 0 && r.AllowShort:
		return Known, true
	}
	return UnknownYet, false
}

// PastTheEnd says whether r has no batch j: past any batch number the
// dataset of samples allows (0: not known), or past the end of its last
// epoch, where last is its last batch computed (ok: there is one) and j
// is not below computed.
func PastTheEnd(st Stream, r Reader, samples int, j uint64, last Batch, ok bool, computed uint64) bool {
	epochs := st.Epochs()
	if epochs == 0 {
		return false
	}
	if samples > 0 {
		perEpoch := (samples + r.BatchSize - 1) / r.BatchSize
		if j >= uint64(epochs*perEpoch) {
			return true
		}
	}
	if !ok || j < computed || last.Epoch < epochs-1 {
		return false
	}
	end, known := EpochEnd(st, r, last.Epoch)
	return known && last.End >= end
}
