package batchstore

// Invalidator is the store's outbound port for frees: it is told the
// moment the store frees a producer batch, so that an adapter can drop
// what it keeps for that batch (the file system: the kernel's inode of
// its file, and with it the page cache its consumers shared). Nothing
// polls the store for it. Freed is called with the store's lock held: it
// must not block, nor call the store.
type Invalidator interface {
	Freed(seq uint64)
}

// noInvalidator is the store's port before an adapter sets one.
type noInvalidator struct{}

func (noInvalidator) Freed(uint64) {}

// SetInvalidator sets the port told of frees (the file system's, at
// mount); nil: none (at unmount).
func (s *Store) SetInvalidator(inv Invalidator) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inv = inv
	if inv == nil {
		s.inv = noInvalidator{}
	}
}
