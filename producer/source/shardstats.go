package source

// What whole-shard reading did and holds, for status, status.json and
// the metrics: counted by the reader of each epoch's schedule, and by the
// readers gone (retire).

// wholeReadsLocked is how many whole-piece reads were made, and their
// bytes; callers hold readerMu (retire adds to the counts of readers gone
// under it).
func (s *Shards) wholeReadsLocked() (requests, bytes int64) {
	requests, bytes = s.wholeRequests, s.wholeBytes
	if r := s.reader; r != nil {
		requests, bytes = requests+r.Requests.Load(), bytes+r.Bytes.Load()
	}
	return requests, bytes
}

// epochReads is what the pieces read while each epoch was scheduled
// took: the reads between one Schedule and the next (the next epoch's
// first pieces, read ahead, included), so status can say what an epoch
// costs, not only the total since the mount.
type epochReads struct {
	scheduled        int   // epochs scheduled so far
	atReads, atBytes int64 // the totals when the last was
	// Last is the last epoch whose schedule ended: its reads and bytes.
	lastReads, lastBytes int64
}

// markEpoch ends the scheduled epoch's count and begins the next's.
// Callers hold s.readerMu.
func (s *Shards) markEpoch() {
	reads, bytes := s.wholeReadsLocked()
	e := &s.epochs
	if e.scheduled > 0 {
		e.lastReads, e.lastBytes = reads-e.atReads, bytes-e.atBytes
	}
	e.scheduled++
	e.atReads, e.atBytes = reads, bytes
}

// Carried is how many pieces new epochs found already held when they
// were scheduled (read ahead for them, or left from the epoch before), and
// how many pieces were read ahead or left for an epoch that did not begin
// with them.
func (s *Shards) Carried() (carried, wasted int64) {
	s.readerMu.Lock()
	defer s.readerMu.Unlock()
	carried, wasted = s.carried, s.carriedWasted
	if s.reader != nil {
		carried, wasted = carried+s.reader.Carried.Load(), wasted+s.reader.Wasted.Load()
	}
	return carried, wasted
}

// ShardStats is what whole-shard reading did and holds, for status.
type ShardStats struct {
	Memory           int64 // the shard memory
	Disk             int64 // the shard disk, in DiskDir
	DiskDir          string
	DiskMapped       int64 // of it in use now
	Held             int   // shards read and held now
	HeldBytes        int64
	Reading          int   // shards being read now
	Reads, ReadBytes int64 // whole-shard reads so far
	// AloneReads and AloneReadBytes are the reads of samples read alone
	// so far (a tar member; a Parquet row group's chunk, or one page).
	AloneReads, AloneReadBytes int64
	// LastEpochReads and LastEpochReadBytes are those of the last epoch
	// whose schedule ended (the next was scheduled); EpochsScheduled,
	// how many were.
	LastEpochReads, LastEpochReadBytes int64
	EpochsScheduled                    int
	Carried, Wasted                    int64 // see Carried
	Index                              string
	// Shards is how many there are, in Pieces of PieceBytes on average;
	// Window, how many pieces a training epoch's shuffle draws from at
	// once (ShuffleWindow; 0: samples are read alone, in a uniform
	// order), holding WindowSamples of Samples; Mix, how that mixes.
	Shards, Pieces, Window int
	PieceBytes             int64
	WindowSamples, Samples int
	Mix                    Mix
	Alone                  string // why every sample is read alone; "" where pieces are read
	// Labels says why every label is 0 (Parquet files without a label
	// column, not said by --columns); "" otherwise.
	Labels string
}

// Stats is what whole-shard reading did and holds now.
func (s *Shards) Stats() ShardStats {
	st := ShardStats{Memory: s.memory, Disk: s.disk, DiskDir: s.diskDir, Index: s.index, Shards: len(s.paths), Pieces: len(s.pieces),
		PieceBytes: s.pieceBytes(), Window: s.ShuffleWindow(), Samples: len(s.samples), Mix: s.mix, Alone: s.alone,
		Labels: s.labels}
	st.WindowSamples = st.Samples
	if st.Window > 0 && st.Window < st.Pieces {
		st.WindowSamples = st.Samples * st.Window / st.Pieces
	}
	st.Held, st.HeldBytes, st.Reading, st.DiskMapped = s.Held()
	st.AloneReads, st.AloneReadBytes = s.aloneReads.Load(), s.aloneBytes.Load()
	s.readerMu.Lock()
	st.Reads, st.ReadBytes = s.wholeReadsLocked()
	st.LastEpochReads, st.LastEpochReadBytes, st.EpochsScheduled = s.epochs.lastReads, s.epochs.lastBytes, s.epochs.scheduled
	s.readerMu.Unlock()
	st.Carried, st.Wasted = s.Carried()
	return st
}

// Held is what piece reading holds now: pieces read, their bytes,
// pieces still being read, and the shard disk's bytes in use.
func (s *Shards) Held() (pieces int, bytes int64, reading int, onDisk int64) {
	s.readerMu.Lock()
	r := s.reader
	s.readerMu.Unlock()
	if r == nil {
		return 0, 0, 0, 0
	}
	_, onDisk = r.bufs.Mapped()
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, w := range r.held {
		select {
		case <-w.ready:
			if w.err == nil && w.data != nil {
				pieces++
				bytes += r.s.pieces[p].size
			}
		default:
			reading++
		}
	}
	return pieces, bytes, reading, onDisk
}
