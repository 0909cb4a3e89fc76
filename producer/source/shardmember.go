package source

// member is sample i's image in its piece's bytes, w (the format's
// rule). Callers hold a reader's count on w.
func (r *shardReader) member(i int, w *wholeShard) ([]byte, error) {
	return r.s.format.member(r.s, i, w)
}

// tookAlone counts a sample of piece sh read alone (no room, or its read
// gave no bytes) against what the epoch still takes of the piece: once
// nothing more is wanted of it, it is dropped, not held to the epoch's
// end. Callers hold r.mu.
func (r *shardReader) tookAlone(sh int32) {
	if r.left[sh]--; r.left[sh] > 0 || (r.ahead == len(r.seq) && r.nextIn[sh]) {
		return
	}
	if w := r.held[sh]; w != nil {
		r.dropLocked(sh, w)
	}
}

// release ends one reader's copy out of w: the last gives back the
// buffer of a shard dropped meanwhile. Callers hold r.mu.
func (r *shardReader) release(w *wholeShard) {
	if w.readers--; w.dropped && w.readers == 0 {
		r.bufs.put(w.data)
		w.data = nil
	}
}
