package plan

import "iter"

// What the producer makes next: every position of an epoch before the
// consumers' last (Config.Epochs, each counted from its own join), and
// past it only as far as a late joiner's last epoch reaches.

// Joined is an active consumer as NeedBound reads it (readers are only
// walked past the consumers' epochs: an iterator, not a slice, so that
// the producer's question for each position allocates nothing): where its first
// epoch starts, and its split (0: aligned to producer epochs).
type Joined struct {
	JoinEpoch int
	Split     int
}

// NeedBound is the first order position of producer epoch e (of
// epochLen) that no consumer needs now: needed below it, not from it on.
// epochs is how many epochs each consumer reads (0: forever);
// producerBatch the producer's batch size; boundary, where split's first
// epoch ends in producer epoch e, once that epoch is ordered.
func NeedBound(e, epochLen, epochs, producerBatch int, readers iter.Seq[Joined], boundary func(e, split int) (int, bool)) int {
	if epochs == 0 || e < epochs {
		return epochLen
	}
	bound := 0
	for c := range readers {
		// Its last epoch: producer epoch JoinEpoch+epochs-1, or, after a
		// stitched first epoch, the one after; a stitched first epoch
		// that is its only one ends at its split in JoinEpoch+1.
		last := c.JoinEpoch + epochs
		partial := c.Split != 0 && epochs == 1
		if c.Split != 0 && !partial {
			last++
		}
		switch {
		case e < last:
			return epochLen
		case e == last && partial:
			bpos, ordered := boundary(e, c.Split)
			if !ordered {
				return epochLen
			}
			b := max(producerBatch, 1)
			bound = max(bound, (bpos+b-1)/b*b)
		}
	}
	return bound
}
