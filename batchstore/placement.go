package batchstore

// Placement: where a consumer's batches lie in the producer's stream,
// fixed at its first lookup. Callers hold s.mu.

// place decides where c starts. Callers hold s.mu.
func (s *Store) place(c *consumer) {
	if s.cfg.Unordered {
		s.placeUnordered(c)
		return
	}
	e := max(s.planned, 0)
	m := s.epochs[e]
	if s.cfg.JoinAtEpoch && m != nil && m.outputSoFar > 0 {
		s.placeAligned(c, e+1)
		return
	}
	if old, ok := s.oldestHeldEpochStart(); ok && old < e {
		s.placeAligned(c, old) // exact with no reordering: nothing to stitch
		return
	}
	// The oldest held batch of epoch e from which every later one is held.
	var first *batch
	for seq := s.nextSeq; seq > 0; seq-- {
		b := s.held[seq-1]
		if b == nil || b.info.Epoch != e {
			break
		}
		first = b
	}
	switch {
	case first != nil && first.first == m.start:
		s.placeAligned(c, e)
	case first != nil:
		s.placeSplit(c, e, int(first.first-m.start), first.info.FirstPos, first.first)
	case m == nil || m.outputSoFar == 0:
		s.placeAligned(c, e)
	case m.ended:
		s.placeAligned(c, e+1)
	default: // nothing of epoch e held: start with the next batch
		s.placeSplit(c, e, m.outputSoFar, s.lastEndPos(e), s.samples)
	}
}

// placeUnordered starts c at the oldest held batch: with no order to
// stitch, its first epoch is what is left of that producer epoch.
// Callers hold s.mu.
func (s *Store) placeUnordered(c *consumer) {
	e := s.currentEpoch()
	if s.cfg.JoinAtEpoch && s.epochs[e] != nil && s.epochs[e].outputSoFar > 0 {
		s.placeAligned(c, e+1)
		return
	}
	if seqs := s.heldSeqs(); len(seqs) > 0 {
		b := s.held[seqs[0]]
		c.joinEpoch, c.splitID = b.info.Epoch, 0
		c.start, c.startKnown = b.first, true
		return
	}
	if m := s.epochs[e]; m != nil && m.ended {
		e++
	}
	c.joinEpoch, c.splitID = e, 0
	c.start, c.startKnown = s.samples, true
}

// currentEpoch is the newest producer epoch that has a mark. Callers
// hold s.mu.
func (s *Store) currentEpoch() int {
	e := 0
	for k := range s.epochs {
		e = max(e, k)
	}
	return e
}

// oldestHeldEpochStart is the oldest epoch whose first batch, and every
// batch published after it, is still held: a joiner can read it from its
// start. Callers hold s.mu.
func (s *Store) oldestHeldEpochStart() (int, bool) {
	epoch, ok := 0, false
	for seq := s.nextSeq; seq > 0; seq-- {
		b := s.held[seq-1]
		if b == nil {
			break
		}
		if m := s.epochs[b.info.Epoch]; m != nil && b.first == m.start {
			epoch, ok = b.info.Epoch, true
		}
	}
	return epoch, ok
}

func (s *Store) placeAligned(c *consumer, epoch int) {
	c.joinEpoch, c.joinPos, c.splitID = epoch, 0, 0
	c.start, c.startKnown = 0, false
	if m := s.epochs[epoch]; m != nil && m.started {
		c.start, c.startKnown = m.start, true
	}
}

func (s *Store) placeSplit(c *consumer, epoch, output, orderPos int, start uint64) {
	c.joinEpoch, c.joinPos, c.splitID = epoch, output, c.id
	c.start, c.startKnown = start, true
	s.splits[c.id] = &split{id: c.id, epoch: epoch, pos: orderPos}
}

// lastEndPos is the order position after epoch e's last published batch.
func (s *Store) lastEndPos(e int) int { return s.epochs[e].lastEndPos }
