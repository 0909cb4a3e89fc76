package batchstore

import (
	"fmt"
	"math/bits"
)

// Subset is the dataset indices one consumer trains on: a bit per
// sample of the dataset (160 KiB for ImageNet), and the form it was
// given in, for status.
type Subset struct {
	form  string
	words []uint64
	count int
}

// NewSubset is the subset of [0, n) for which has says yes; form is how
// the user wrote it. An empty one is refused: a consumer with nothing to
// read would have epochs of nothing.
func NewSubset(form string, n int, has func(i int) bool) (*Subset, error) {
	s := &Subset{form: form, words: make([]uint64, (n+63)/64)}
	for i := range n {
		if has(i) {
			s.words[i/64] |= 1 << (i % 64)
			s.count++
		}
	}
	if s.count == 0 {
		return nil, fmt.Errorf("subset %q holds no sample: %w", form, ErrBadSubset)
	}
	return s, nil
}

// Has says whether dataset index i is in s; a nil s is the whole dataset.
func (s *Subset) Has(i int) bool {
	if s == nil {
		return true
	}
	return i >= 0 && i/64 < len(s.words) && s.words[i/64]&(1<<(i%64)) != 0
}

// Len is the number of samples in s; 0 for a nil s (everything).
func (s *Subset) Len() int {
	if s == nil {
		return 0
	}
	return s.count
}

// Form is s as the user wrote it, canonical: "fold 2/5", "classes 3 7", …
func (s *Subset) Form() string {
	if s == nil {
		return "all"
	}
	return s.form
}

// within says whether every sample of s is in u (nil: everything).
func (s *Subset) within(u *Subset) bool {
	switch {
	case u == nil:
		return true
	case s == nil:
		return false
	}
	for k, w := range s.words {
		if k >= len(u.words) || w&^u.words[k] != 0 {
			return false
		}
	}
	return true
}

// union is what a and b hold together; nil (everything) if either is.
func union(a, b *Subset) *Subset {
	if a == nil || b == nil {
		return nil
	}
	u := &Subset{form: "union", words: make([]uint64, max(len(a.words), len(b.words)))}
	for k := range u.words {
		if k < len(a.words) {
			u.words[k] |= a.words[k]
		}
		if k < len(b.words) {
			u.words[k] |= b.words[k]
		}
		u.count += bits.OnesCount64(u.words[k])
	}
	return u
}

// SetSubset makes sub what name trains on (nil: everything). Before its
// first read it applies at once: a consumer whose start the producer has
// ordered without all of sub starts at the next producer epoch instead,
// which will hold it. Later it applies from the first of its own epochs
// that starts in a producer epoch not ordered yet, so that every epoch of
// it is exact: the one under way keeps the subset it began with. A
// subset is refused where batches carry no dataset indices (an unordered
// ingest), and where a batch of it would span more producer batches
// than the buffer holds.
func (s *Store) SetSubset(name string, sub *Subset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.ros.consumers[name]
	if !ok {
		return fmt.Errorf("subset of %s: %w", name, ErrNoConsumer)
	}
	asked := sub
	sub, err := s.cfg.Node.cut(sub, c.dropLast)
	if err != nil {
		return fmt.Errorf("subset %s of %s: %w", asked.Form(), name, err)
	}
	if g := c.group; g != nil && (g.claimed > 0 || c.started) {
		// Every rank reads the same rounds: what they train on is fixed
		// once they joined (the same subset may be written again).
		if sub.Form() == c.subset.Form() && sub.Len() == c.subset.Len() {
			return nil
		}
		return fmt.Errorf("subset %s of %s: its ranks joined with subset %s: %w", sub.Form(), name, c.subset.Form(), ErrBusy)
	}
	if sub != nil {
		if err := s.ros.checkSubset(c, sub); err != nil {
			return fmt.Errorf("subset %s of %s: %w", sub.Form(), name, err)
		}
	}
	c.asked = asked
	if !c.started {
		c.subset, c.pending, c.decided = sub, nil, true
		s.dem.settle(c)
	} else {
		s.ros.setNext(c, sub)
		s.dem.wantsChanged()
	}
	s.broadcast()
	return nil
}

// RefusedSubset records why a write to name's subset file was refused,
// for its status: the write itself can only say EINVAL.
func (s *Store) RefusedSubset(name string, why error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.ros.consumers[name]; ok {
		c.subsetRefused = why.Error()
	}
}

// GrowSamples says the dataset has n samples now (a rescan appended
// some): indices below n may come, subsets may name them.
func (s *Store) GrowSamples(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Samples = max(s.cfg.Samples, n)
}

// checkSubset refuses a subset the stream cannot serve c. callers hold Store.mu.
func (ro *roster) checkSubset(c *consumer, sub *Subset) error {
	s := ro.s
	if s.cfg.Unordered {
		return fmt.Errorf("an unordered ingest (no sample count) has no dataset indices to pick by: %w", ErrBadSubset)
	}
	if s.cfg.Samples > 0 && len(sub.words) > (s.cfg.Samples+63)/64 {
		return fmt.Errorf("made for another dataset size than %d: %w", s.cfg.Samples, ErrBadSubset)
	}
	if err := s.dem.combinedNeed(c, sub); err != nil {
		return fmt.Errorf("%w: %w", err, ErrBadSubset)
	}
	return nil
}

// firstProducerEpoch is the producer epoch where c's own epoch k starts:
// after a stitched first epoch, its epochs are whole producer epochs,
// from the one after the one its first epoch ended in.
func firstProducerEpoch(c *consumer, k int) int {
	if c.splitID != 0 && k > 0 {
		return c.joinEpoch + k + 1
	}
	return c.joinEpoch + k
}

// setNext makes sub c's subset from its first own epoch that starts in a
// producer epoch not ordered yet. callers hold Store.mu.
func (ro *roster) setNext(c *consumer, sub *Subset) {
	s := ro.s
	k := 0
	if last, ok := c.batches.Last(); ok {
		k = last.Epoch + 1
	}
	for len(c.pending) > 0 && c.pending[0].from < k { // in effect
		c.subset, c.pending = c.pending[0].sub, c.pending[1:]
	}
	// A pending change no ordered producer epoch is bound to yet is
	// replaced where it stands: a newer subset never pushes a change
	// later than the one it replaces (rewritten every 40 ms, one that
	// moved on at each write never applied). One that is bound stays.
	if n := len(c.pending); n > 0 && firstProducerEpoch(c, c.pending[n-1].from) > s.dem.lastOrdered() {
		c.pending[n-1].sub = sub
		return
	}
	for firstProducerEpoch(c, k) <= s.dem.lastOrdered() {
		k++
	}
	c.pending = append(c.pending, subsetChange{from: k, sub: sub})
}
