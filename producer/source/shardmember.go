package source

import "fmt"

// member is sample i's image in its piece's bytes, w: a slice of a tar
// piece, a row of a Parquet row group's decoded images. Callers hold a
// reader's count on w.
func (r *shardReader) member(i int, w *wholeShard) ([]byte, error) {
	smp := r.s.samples[i]
	if r.s.pq != nil {
		if w.bad != nil {
			return nil, fmt.Errorf("%s: its row group: %w", r.s.Name(i), w.bad)
		}
		b, err := rowImage(w.data, w.rows, r.s.rowInGroup(i))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.s.Name(i), err)
		}
		return b, nil
	}
	n, at := int64(smp.size), smp.offset-r.s.pieces[smp.piece].off
	if at < 0 || at+n > int64(len(w.data)) {
		return nil, fmt.Errorf("sample %d: member at %d+%d past its piece's %d bytes: %w", i, at, n, len(w.data), ErrShardChanged)
	}
	return w.data[at : at+n], nil
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
