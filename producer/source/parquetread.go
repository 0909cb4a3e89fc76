package source

import (
	"context"
	"errors"
	"fmt"

	"github.com/tsock/tsock/producer/source/internal/pqfile"
)

// cutGroups makes a Parquet dataset's pieces: a row group's image column
// chunk each, whatever the target (a chunk is read whole or not at all).
func (f *parquetFormat) cutGroups(s *Shards) {
	for i := 0; i < len(s.samples); {
		sh := s.samples[i].shard
		pq := f.files[sh]
		g := -1
		for ; i < len(s.samples) && s.samples[i].shard == sh; i++ {
			smp := &s.samples[i]
			if sg, _ := pq.group(smp.offset); sg != g {
				g = sg
				off, read, held := pq.chunk(g)
				if held > s.aloneRoom() {
					// The footer claims more than any row group may be
					// decoded into: never held (size 0), so that its claim
					// sizes no window, disk or buffer; read alone, where its
					// pages' own word decides (readAlone).
					held = 0
				}
				s.pieces = append(s.pieces, piece{shard: sh, group: int32(g), off: off, size: held, read: read})
			}
			smp.piece = int32(len(s.pieces) - 1)
			s.pieces[len(s.pieces)-1].samples++
		}
	}
}

// readGroup reads piece pc's chunk and decodes its images into buf (the
// piece's size of room): the rows' ends in it.
func (f *parquetFormat) readGroup(ctx context.Context, s *Shards, pc piece, buf []byte) ([]int64, error) {
	raw := make([]byte, pc.read) // its bytes in the file, which the file's size bounds (openParquet checked the footer's word)
	if err := s.files.readAt(ctx, s.paths[pc.shard], s.versions[pc.shard], raw, pc.off); err != nil {
		return nil, err
	}
	ends, err := f.files[pc.shard].imageRows(int(pc.group), raw, buf)
	if err != nil {
		return nil, &groupError{err: err}
	}
	return ends, nil
}

// rowInGroup is Parquet sample i's row in its piece's row group.
func (f *parquetFormat) rowInGroup(s *Shards, i int) int64 {
	smp := s.samples[i]
	return smp.offset - f.files[smp.shard].groups[s.pieces[smp.piece].group].first
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

// readAlone reads sample i alone (no room to hold its row group for
// the epoch): the first time its row group is read so, the whole chunk,
// decoded, and the chunk's page spans kept; every later time, the row's
// own page only (and the chunk's dictionary, where it has one), a page of
// some images rather than the whole group (a Parquet image is no byte
// range of its file: a page is the least that decodes).
//
// The room it decodes into is what the pages say they take (never the
// footer's word alone: a footer may claim a terabyte), at most
// aloneRoom: a row group past that is left out, said.
func (f *parquetFormat) readAlone(ctx context.Context, s *Shards, i int, scratch *[]byte) ([]byte, error) {
	smp := s.samples[i]
	pc := s.pieces[smp.piece]
	read := func(p []byte, off int64) error { // this file's bytes, counted as a read alone
		err := s.files.readAt(ctx, s.paths[pc.shard], s.versions[pc.shard], p, off)
		if err == nil {
			s.aloneRead(int64(len(p)))
		}
		return err
	}
	b, err := f.files[pc.shard].aloneRow(int(pc.group), f.rowInGroup(s, i), s.aloneRoom(), read)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name(i), err)
	}
	*scratch = append((*scratch)[:0], b...)
	return *scratch, nil
}

// aloneRow is row of row group g read alone, in at most room bytes
// decoded, through read (the file's bytes at an offset): the row's own
// page where the group's page spans are known, else the group's whole
// chunk, whose spans are then kept.
func (pq *parquetShard) aloneRow(g int, row, room int64, read func(p []byte, off int64) error) ([]byte, error) {
	pq.mu.Lock()
	spans := pq.groups[g].spans
	pq.mu.Unlock()
	if spans != nil {
		return pq.pageRow(g, row, room, spans, read)
	}
	return pq.groupRow(g, row, room, read)
}

// groupRow reads row group g's whole image chunk for its row, and keeps
// the chunk's page spans for the rows read alone after it.
func (pq *parquetShard) groupRow(g int, row, room int64, read func(p []byte, off int64) error) ([]byte, error) {
	ch := pq.groups[g].chunk
	raw := make([]byte, ch.Size)
	if err := read(raw, ch.Off); err != nil {
		return nil, err
	}
	need, _, err := pqfile.Need(raw, ch.Codec)
	if err == nil && need > room {
		err = fmt.Errorf("its pages take %d bytes decompressed, over the %d a row group read for one sample may (the shard memory, or %d) (%w)",
			need, room, DefaultShardMemory, errTooBig)
	}
	if err != nil { // what the chunk's own bytes say: its rows are skipped
		return nil, &groupError{err: fmt.Errorf("row group %d: %w", pq.groups[g].num, err)}
	}
	buf := make([]byte, need)
	ends, err := pq.imageRows(g, raw, buf)
	if err != nil {
		return nil, &groupError{err: err}
	}
	if spans, err := pqfile.Spans(raw); err == nil {
		pq.mu.Lock()
		pq.groups[g].spans = spans
		pq.mu.Unlock()
	}
	return rowImage(buf, ends, row)
}

// pageRow reads row's page of row group g (spans: its chunk's pages),
// and the chunk's dictionary where it has one, and decodes the row's
// image.
func (pq *parquetShard) pageRow(g int, row, room int64, spans []pqfile.Span, read func(p []byte, off int64) error) ([]byte, error) {
	var dict, page pqfile.Span
	first := int64(-1)
	var at int64
	for _, sp := range spans {
		if sp.Dict {
			dict = sp
			continue
		}
		if row < at+sp.Values {
			page, first = sp, at
			break
		}
		at += sp.Values
	}
	if first < 0 {
		return nil, fmt.Errorf("row %d past its row group's pages: %w", row, ErrShardChanged)
	}
	off := pq.groups[g].chunk.Off
	raw := make([]byte, dict.Len+page.Len)
	if dict.Len > 0 {
		if err := read(raw[:dict.Len], off+dict.At); err != nil {
			return nil, err
		}
	}
	if err := read(raw[dict.Len:], off+page.At); err != nil {
		return nil, err
	}
	var img []byte
	n := int64(0)
	err := pqfile.Decode(raw, pq.imageCol(g), page.Values, room, func(v pqfile.Value) error {
		if n == row-first {
			if v.Null {
				return errNullImage
			}
			img = v.Bytes
		}
		n++
		return nil
	})
	switch {
	case errors.Is(err, errNullImage):
		return nil, err
	case err != nil:
		return nil, &groupError{err: fmt.Errorf("row group %d: %w", pq.groups[g].num, err)}
	}
	return img, nil
}

// errNullImage: a row whose image is null.
var errNullImage = errors.New("its image is null")
