package plan

// Placement: where a joining consumer's batches lie in the producer's
// stream, decided at its first lookup (or when it settles).

// Mark is what the store knows of one producer epoch.
type Mark struct {
	Start       uint64 // its first global sample; valid when Started
	Started     bool
	Ended       bool // its last batch is published
	OutputSoFar int  // its samples published so far
	LastEndPos  int  // the order position after its last published batch
}

// Held is a held producer batch, as placement reads it.
type Held struct {
	Epoch    int
	First    uint64 // its first global sample
	FirstPos int    // its first sample's position in its epoch's order
}

// Joining is the stream as a joining consumer's placement reads it.
type Joining struct {
	Unordered   bool // the producer owns the order: nothing is stitched
	JoinAtEpoch bool // join at the next producer epoch, never mid-epoch
	Ordered     int  // the latest producer epoch whose order is fixed, -1 before any
	Newest      int  // the newest producer epoch with a mark
	Mark        func(e int) (Mark, bool)
	// Tail is the held batches from the newest published back to the
	// first one not held, newest first; Oldest, the oldest held of all.
	Tail      []Held
	Oldest    Held
	HasOldest bool
	Published uint64 // samples published so far
}

// Placement is where a consumer starts.
type Placement struct {
	Epoch int // the producer epoch its first epoch starts in
	// Split: it joins mid-epoch, at order position OrderPos of Epoch,
	// Output samples of it published before it (a split's first epoch
	// is stitched: see the package doc).
	Split            bool
	Output, OrderPos int
	Start            uint64 // its first global sample, where StartKnown
	StartKnown       bool
}

// Place decides where a consumer that joins now starts.
func Place(j Joining) Placement {
	if j.Unordered {
		return placeUnordered(j)
	}
	e := max(j.Ordered, 0)
	m, hasMark := j.Mark(e)
	if j.JoinAtEpoch && hasMark && m.OutputSoFar > 0 {
		return aligned(j, e+1)
	}
	if old, ok := oldestHeldEpochStart(j); ok && old < e {
		return aligned(j, old) // exact with no reordering: nothing to stitch
	}
	// The oldest held batch of epoch e from which every later one is held.
	var first *Held
	for k := range j.Tail {
		if j.Tail[k].Epoch != e {
			break
		}
		first = &j.Tail[k]
	}
	switch {
	case first != nil && first.First == m.Start:
		return aligned(j, e)
	case first != nil:
		return Placement{Epoch: e, Split: true, Output: int(first.First - m.Start), OrderPos: first.FirstPos, Start: first.First, StartKnown: true}
	case !hasMark || m.OutputSoFar == 0:
		return aligned(j, e)
	case m.Ended:
		return aligned(j, e+1)
	}
	return SplitAt(e, m, j.Published) // nothing of epoch e held: start with the next batch

}

// placeUnordered starts a consumer at the oldest held batch: with no
// order to stitch, its first epoch is what is left of that producer
// epoch.
func placeUnordered(j Joining) Placement {
	e := j.Newest
	m, hasMark := j.Mark(e)
	if j.JoinAtEpoch && hasMark && m.OutputSoFar > 0 {
		return aligned(j, e+1)
	}
	if j.HasOldest {
		return Placement{Epoch: j.Oldest.Epoch, Start: j.Oldest.First, StartKnown: true}
	}
	if hasMark && m.Ended {
		e++
	}
	return Placement{Epoch: e, Start: j.Published, StartKnown: true}
}

// aligned starts a consumer at producer epoch e's start.
func aligned(j Joining, e int) Placement { return Aligned(j.Mark, e) }

// oldestHeldEpochStart is the oldest epoch whose first batch, and every
// batch published after it, is still held: a joiner can read it from its
// start.
func oldestHeldEpochStart(j Joining) (int, bool) {
	epoch, ok := 0, false
	for _, h := range j.Tail {
		if m, has := j.Mark(h.Epoch); has && h.First == m.Start {
			epoch, ok = h.Epoch, true
		}
	}
	return epoch, ok
}

// Aligned starts a consumer at producer epoch e's start (where a consumer
// that could not be placed earlier settles: the next epoch not ordered).
func Aligned(mark func(e int) (Mark, bool), e int) Placement {
	p := Placement{Epoch: e}
	if m, ok := mark(e); ok && m.Started {
		p.Start, p.StartKnown = m.Start, true
	}
	return p
}

// SplitAt starts a consumer mid-epoch at the newest published batch of
// producer epoch e (whose mark is m): the rest of it, then what it missed.
func SplitAt(e int, m Mark, published uint64) Placement {
	return Placement{Epoch: e, Split: true, Output: m.OutputSoFar, OrderPos: m.LastEndPos, Start: published, StartKnown: true}
}
