package batchstore

// Placement: where a consumer's batches lie in the producer's stream,
// fixed at its first lookup. callers hold Store.mu.

// place decides where c starts. callers hold Store.mu.
func (ro *roster) place(c *consumer) {
	s := ro.s
	if s.cfg.Unordered {
		ro.placeUnordered(c)
		return
	}
	e := max(s.dem.ordered, 0)
	m := s.dem.epochs[e]
	if s.cfg.JoinAtEpoch && m != nil && m.outputSoFar > 0 {
		ro.placeAligned(c, e+1)
		return
	}
	if old, ok := ro.oldestHeldEpochStart(); ok && old < e {
		ro.placeAligned(c, old) // exact with no reordering: nothing to stitch
		return
	}
	// The oldest held batch of epoch e from which every later one is held.
	var first *batch
	for seq := s.buf.nextSeq; seq > 0; seq-- {
		b := s.buf.held[seq-1]
		if b == nil || b.info.Epoch != e {
			break
		}
		first = b
	}
	switch {
	case first != nil && first.first == m.start:
		ro.placeAligned(c, e)
	case first != nil:
		ro.placeSplit(c, e, int(first.first-m.start), first.info.FirstPos, first.first)
	case m == nil || m.outputSoFar == 0:
		ro.placeAligned(c, e)
	case m.ended:
		ro.placeAligned(c, e+1)
	default: // nothing of epoch e held: start with the next batch
		ro.placeSplit(c, e, m.outputSoFar, s.dem.lastEndPos(e), s.buf.samples)
	}
}

// placeUnordered starts c at the oldest held batch: with no order to
// stitch, its first epoch is what is left of that producer epoch.
// Callers hold Store.mu.
func (ro *roster) placeUnordered(c *consumer) {
	s := ro.s
	e := ro.currentEpoch()
	if s.cfg.JoinAtEpoch && s.dem.epochs[e] != nil && s.dem.epochs[e].outputSoFar > 0 {
		ro.placeAligned(c, e+1)
		return
	}
	if seqs := s.buf.heldSeqs(); len(seqs) > 0 {
		b := s.buf.held[seqs[0]]
		c.joinEpoch, c.splitID = b.info.Epoch, 0
		c.start, c.startKnown = b.first, true
		return
	}
	if m := s.dem.epochs[e]; m != nil && m.ended {
		e++
	}
	c.joinEpoch, c.splitID = e, 0
	c.start, c.startKnown = s.buf.samples, true
}

// currentEpoch is the newest producer epoch that has a mark. Callers
// hold s.mu.
func (ro *roster) currentEpoch() int {
	s := ro.s
	e := 0
	for k := range s.dem.epochs {
		e = max(e, k)
	}
	return e
}

// oldestHeldEpochStart is the oldest epoch whose first batch, and every
// batch published after it, is still held: a joiner can read it from its
// start. callers hold Store.mu.
func (ro *roster) oldestHeldEpochStart() (int, bool) {
	s := ro.s
	epoch, ok := 0, false
	for seq := s.buf.nextSeq; seq > 0; seq-- {
		b := s.buf.held[seq-1]
		if b == nil {
			break
		}
		if m := s.dem.epochs[b.info.Epoch]; m != nil && b.first == m.start {
			epoch, ok = b.info.Epoch, true
		}
	}
	return epoch, ok
}

func (ro *roster) placeAligned(c *consumer, epoch int) {
	s := ro.s
	c.joinEpoch, c.joinPos, c.splitID = epoch, 0, 0
	c.start, c.startKnown = 0, false
	if m := s.dem.epochs[epoch]; m != nil && m.started {
		c.start, c.startKnown = m.start, true
	}
}

func (ro *roster) placeSplit(c *consumer, epoch, output, orderPos int, start uint64) {
	c.joinEpoch, c.joinPos, c.splitID = epoch, output, c.id
	c.start, c.startKnown = start, true
	ro.splits[c.id] = &split{id: c.id, epoch: epoch, pos: orderPos}
}
