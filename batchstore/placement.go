package batchstore

import "github.com/tsock/tsock/batchstore/internal/plan"

// Placement: where a consumer's batches lie in the producer's stream,
// fixed at its first lookup. plan.Place decides; here the view is built
// and the decision applied. callers hold Store.mu.

// place places c. callers hold Store.mu.
func (ro *roster) place(c *consumer) { ro.apply(c, plan.Place(ro.s.joining())) }

// apply places c where p says. callers hold Store.mu.
func (ro *roster) apply(c *consumer, p plan.Placement) {
	c.joinEpoch, c.joinPos, c.splitID = p.Epoch, 0, 0
	c.start, c.startKnown = p.Start, p.StartKnown
	if p.Split {
		c.joinPos, c.splitID = p.Output, c.id
		ro.splits[c.id] = &split{id: c.id, epoch: p.Epoch, pos: p.OrderPos}
	}
}

// joining is the stream as a joiner's placement reads it: a view the
// store builds over its parts. callers hold Store.mu.
func (s *Store) joining() plan.Joining {
	j := plan.Joining{Unordered: s.cfg.Unordered, JoinAtEpoch: s.cfg.JoinAtEpoch, Ordered: s.dem.lastOrdered(),
		Mark: s.dem.markView, Published: s.buf.published(), Newest: s.dem.newest()}
	for _, b := range s.buf.tail() {
		j.Tail = append(j.Tail, plan.Held{Epoch: b.info.Epoch, First: b.first, FirstPos: b.info.FirstPos})
	}
	if b := s.buf.oldest(); b != nil {
		j.Oldest, j.HasOldest = plan.Held{Epoch: b.info.Epoch, First: b.first, FirstPos: b.info.FirstPos}, true
	}
	return j
}
