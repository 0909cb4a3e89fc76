package source

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
				if held > s.aloneRoom() {
					// The footer claims more than any row group may be
					// decoded into: never held (size 0), so that its claim
					// sizes no window, disk or buffer; read alone, where its
					// pages' own word decides (parquetAlone).
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

// parquetAlone reads sample i alone (no room to hold its row group for
// the epoch): the first time its row group is read so, the whole chunk,
// decoded, and the chunk's page spans kept; every later time, the row's
// own page only (and the chunk's dictionary, where it has one), a page of
// some images rather than the whole group (a Parquet image is no byte
// range of its file: a page is the least that decodes).
//
// The room it decodes into is what the pages say they take (never the
// footer's word alone: a footer may claim a terabyte), at most
// aloneRoom: a row group past that is left out, said.
func (s *Shards) parquetAlone(ctx context.Context, i int, scratch *[]byte) ([]byte, error) {
	smp := s.samples[i]
	pc := s.pieces[smp.piece]
	row := s.rowInGroup(i)
	var b []byte
	var err error
	if spans, ok := s.spans.get(pc.shard, pc.group); ok {
		b, err = s.pageRow(ctx, pc, spans, row)
	} else {
		b, err = s.groupRow(ctx, pc, row)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name(i), err)
	}
	*scratch = append((*scratch)[:0], b...)
	return *scratch, nil
}

// groupRow reads piece pc's whole chunk for its row, and keeps the
// chunk's page spans for the rows read alone after it.
func (s *Shards) groupRow(ctx context.Context, pc piece, row int64) ([]byte, error) {
	raw, err := s.readChunk(ctx, pc)
	if err != nil {
		return nil, err
	}
	s.aloneRead(int64(len(raw)))
	pq := s.pq[pc.shard]
	g := int(pc.group)
	need, _, err := pqfile.Need(raw, pq.groups[g].chunk.Codec)
	if err == nil && need > s.aloneRoom() {
		err = fmt.Errorf("its pages take %d bytes decompressed, over the %d a row group read for one sample may (the shard memory, or %d) (%w)",
			need, s.aloneRoom(), DefaultShardMemory, errTooBig)
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
		s.spans.put(pc.shard, pc.group, spans)
	}
	return rowImage(buf, ends, row)
}

// pageRow reads row's page of piece pc (spans: its chunk's pages), and
// the chunk's dictionary where it has one, and decodes the row's image.
func (s *Shards) pageRow(ctx context.Context, pc piece, spans []pqfile.Span, row int64) ([]byte, error) {
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
	raw := make([]byte, dict.Len+page.Len)
	if dict.Len > 0 {
		if err := s.files.readAt(ctx, s.paths[pc.shard], s.versions[pc.shard], raw[:dict.Len], pc.off+dict.At); err != nil {
			return nil, err
		}
	}
	if err := s.files.readAt(ctx, s.paths[pc.shard], s.versions[pc.shard], raw[dict.Len:], pc.off+page.At); err != nil {
		return nil, err
	}
	s.aloneRead(int64(len(raw)))
	pq := s.pq[pc.shard]
	g := int(pc.group)
	var img []byte
	n := int64(0)
	err := pqfile.Decode(raw, pq.imageCol(g), page.Values, s.aloneRoom(), func(v pqfile.Value) error {
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

// pageSpans are the page spans of the row groups read alone, by file and
// row group: what lets a row be read as its own page. Kept for the
// mount's life (a few numbers a page), learnt as the groups are read.
type pageSpans struct {
	mu sync.Mutex
	m  map[[2]int32][]pqfile.Span
}

func (p *pageSpans) get(shard, group int32) ([]pqfile.Span, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sp, ok := p.m[[2]int32{shard, group}]
	return sp, ok
}

func (p *pageSpans) put(shard, group int32, spans []pqfile.Span) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[[2]int32][]pqfile.Span{}
	}
	p.m[[2]int32{shard, group}] = spans
}
