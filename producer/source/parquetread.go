package source

import (
	"context"
	"fmt"

	"github.com/tsock/tsock/producer/source/internal/pqfile"
)

// cutGroups makes a Parquet dataset's pieces: a row group's image column
// chunk each, whatever the target (a chunk is read whole or not at all).
func (s *Shards) cutGroups() {
	for i := 0; i < len(s.samples); {
		sh := s.samples[i].shard
		pq := s.pq[sh]
		g := -1
		for ; i < len(s.samples) && s.samples[i].shard == sh; i++ {
			smp := &s.samples[i]
			if sg, _ := pq.group(smp.offset); sg != g {
				g = sg
				off, read, held := pq.chunk(g)
				s.pieces = append(s.pieces, piece{shard: sh, group: int32(g), off: off, size: held, read: read})
			}
			smp.piece = int32(len(s.pieces) - 1)
			s.pieces[len(s.pieces)-1].samples++
		}
	}
}

// readGroup reads piece pc's chunk and decodes its images into buf (the
// piece's size of room): the rows' ends in it.
func (s *Shards) readGroup(ctx context.Context, pc piece, buf []byte) ([]int64, error) {
	raw, err := s.readChunk(ctx, pc)
	if err != nil {
		return nil, err
	}
	ends, err := s.pq[pc.shard].imageRows(int(pc.group), raw, buf)
	if err != nil {
		return nil, &groupError{err: err}
	}
	return ends, nil
}

// readChunk reads piece pc's chunk: its bytes in the file, which the
// file's size bounds (openParquet checked the footer's word).
func (s *Shards) readChunk(ctx context.Context, pc piece) ([]byte, error) {
	raw := make([]byte, pc.read)
	if err := s.files.readAt(ctx, s.paths[pc.shard], s.versions[pc.shard], raw, pc.off); err != nil {
		return nil, err
	}
	return raw, nil
}

// rowInGroup is Parquet sample i's row in its piece's row group.
func (s *Shards) rowInGroup(i int) int64 {
	smp := s.samples[i]
	return smp.offset - s.pq[smp.shard].groups[s.pieces[smp.piece].group].first
}

// aloneRoom is the most a row group read for one sample may take
// decoded: the shard memory, or the default's where it is smaller (a
// sample must be read, --shard-memory 0 or not).
func (s *Shards) aloneRoom() int64 { return max(s.memory, DefaultShardMemory) }

// groupError: a row group's images do not decode; its rows are skipped,
// each for what its own bytes say.
type groupError struct{ err error }

func (e *groupError) Error() string { return e.err.Error() }

func (e *groupError) Unwrap() error { return e.err }

// parquetAlone reads sample i alone: its row group's chunk, decoded, for
// one row (a Parquet image is no byte range of its file).
//
// The room it decodes into is what the chunk's pages say they take
// (never the footer's word alone: a footer may claim a terabyte), at
// most aloneRoom: a row group past that is left out, said.
func (s *Shards) parquetAlone(ctx context.Context, i int, scratch *[]byte) ([]byte, error) {
	smp := s.samples[i]
	pc := s.pieces[smp.piece]
	raw, err := s.readChunk(ctx, pc)
	if err != nil {
		return nil, err
	}
	pq := s.pq[pc.shard]
	g := int(pc.group)
	need, _, err := pqfile.Need(raw, pq.groups[g].chunk.Codec)
	if err != nil {
		err = fmt.Errorf("row group %d: %w", pq.groups[g].num, err)
	} else if need > s.aloneRoom() {
		err = fmt.Errorf("row group %d: its pages take %d bytes decompressed, over the %d a row group read for one sample may (the shard memory, or %d) (%w)",
			pq.groups[g].num, need, s.aloneRoom(), DefaultShardMemory, errTooBig)
	}
	var buf []byte
	var ends []int64
	if err == nil {
		buf = make([]byte, need)
		ends, err = pq.imageRows(g, raw, buf)
	}
	if err != nil { // what the chunk's own bytes say: its rows are skipped
		return nil, fmt.Errorf("%s: %w", s.Name(i), &groupError{err: err})
	}
	b, err := rowImage(buf, ends, s.rowInGroup(i))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name(i), err)
	}
	*scratch = append((*scratch)[:0], b...)
	return *scratch, nil
}
