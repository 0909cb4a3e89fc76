package pqfile

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Page types.
const (
	dataPage       = 0
	indexPage      = 1
	dictionaryPage = 2
	dataPageV2     = 3
)

// pageHeader is what a page's header says, as far as reading needs.
type pageHeader struct {
	typ                int32
	uncompressed, size int32
	values             int32 // a data page's values, nulls included; a dictionary's entries
	encoding           int32
	defEncoding        int32
	defBytes, repBytes int32 // a v2 page's levels, stored uncompressed
	compressed         bool  // a v2 page's values are compressed (its default)
}

// readHeader reads the page header at the start of b; n is its length.
func readHeader(b []byte) (h pageHeader, n int, err error) {
	r := &reader{b: b}
	h.compressed = true
	seen := 0
	r.each(func(id int16, typ byte) bool {
		switch {
		case id == 1:
			h.typ, seen = int32(r.int(typ)), seen|1
		case id == 2:
			h.uncompressed, seen = r.i32(), seen|2
		case id == 3:
			h.size, seen = r.i32(), seen|4
		case id == 5 && typ == tStruct:
			r.each(func(id int16, typ byte) bool {
				switch id {
				case 1:
					h.values = r.i32()
				case 2:
					h.encoding = r.i32()
				case 3:
					h.defEncoding = r.i32()
				default:
					return false
				}
				return true
			})
		case id == 7 && typ == tStruct:
			r.each(func(id int16, typ byte) bool {
				switch id {
				case 1:
					h.values = r.i32()
				case 2:
					h.encoding = r.i32()
				default:
					return false
				}
				return true
			})
		case id == 8 && typ == tStruct:
			r.each(func(id int16, typ byte) bool {
				switch id {
				case 1:
					h.values = r.i32()
				case 4:
					h.encoding = r.i32()
				case 5:
					h.defBytes = r.i32()
				case 6:
					h.repBytes = r.i32()
				case 7:
					if typ != tTrue && typ != tFalse {
						return false
					}
					h.compressed = r.boolean(typ)
				default:
					return false
				}
				return true
			})
		default:
			return false
		}
		return true
	})
	if r.err != nil {
		return h, 0, r.err
	}
	if seen != 7 {
		return h, 0, errors.New("a page header without its type or sizes")
	}
	if h.uncompressed < 0 || h.size < 0 || h.values < 0 || h.defBytes < 0 || h.repBytes < 0 {
		return h, 0, fmt.Errorf("a page header with negative sizes (%d compressed, %d decompressed, %d values)", h.size, h.uncompressed, h.values)
	}
	return h, r.at, nil
}

// ErrTooBig: a chunk whose pages would take more memory than it may.
var ErrTooBig = errors.New("too big to decode")

// page is one page of a chunk, its header read and its bytes found.
type page struct {
	h    pageHeader
	at   int    // its header's byte in the chunk
	data []byte // its bytes after the header, as stored
}

// pages splits a chunk's bytes into pages: every page within the chunk,
// no gap and nothing after the last.
func pages(raw []byte) ([]page, error) {
	var out []page
	for at := 0; at < len(raw); {
		h, n, err := readHeader(raw[at:])
		if err != nil {
			return nil, fmt.Errorf("the page header at byte %d of its chunk: %w", at, err)
		}
		if int64(h.size) > int64(len(raw)-at-n) {
			return nil, fmt.Errorf("the page at byte %d of its chunk: %d bytes compressed, %d decompressed, in the %d bytes left of the chunk",
				at, h.size, h.uncompressed, len(raw)-at-n)
		}
		out = append(out, page{h: h, at: at, data: raw[at+n : at+n+int(h.size)]})
		at += n + int(h.size)
	}
	return out, nil
}

// Need walks a chunk's page headers (raw: its bytes, compressed with
// codec) and says what decompressing its pages takes (the sum of their
// uncompressed sizes) and how many values its data pages say they hold.
// A page whose codec says, where it says one, that it decompresses to
// more than its header does is an error; nothing is decompressed.
func Need(raw []byte, codec Codec) (need, values int64, err error) {
	ps, err := pages(raw)
	if err != nil {
		return 0, 0, err
	}
	return survey(ps, codec)
}

// survey is what ps take decompressed and the values their data pages
// hold, each page's codec's word checked against its header.
func survey(ps []page, codec Codec) (need, values int64, err error) {
	for _, p := range ps {
		if err := p.checkCodec(codec); err != nil {
			return 0, 0, err
		}
		need += int64(p.h.uncompressed)
		if p.h.typ == dataPage || p.h.typ == dataPageV2 {
			values += int64(p.h.values)
		}
	}
	return need, values, nil
}

// levelBytes are a v2 page's levels, stored before its values and never
// compressed.
func (p page) levelBytes() int {
	if p.h.typ != dataPageV2 {
		return 0
	}
	return int(p.h.defBytes) + int(p.h.repBytes)
}

// compressedPart is the part of a page's bytes its codec compressed: nil
// where none is.
func (p page) compressedPart() []byte {
	if p.h.typ == dataPageV2 {
		if !p.h.compressed || p.levelBytes() > len(p.data) {
			return nil
		}
		return p.data[p.levelBytes():]
	}
	return p.data
}

// declared is the least a compressed page's bytes decompress to by its
// codec's own word, where the codec says it at the start: SNAPPY's
// length, the first ZSTD frame's content size (other frames only add to
// it), LZ4's Hadoop frame; ok is false where it says nothing.
func declared(codec Codec, data []byte) (int64, bool) {
	switch codec {
	case Snappy:
		n, k := binary.Uvarint(data)
		if k <= 0 {
			return 0, false
		}
		return int64(min(n, 1<<62)), true
	case Zstd:
		return zstdContentSize(data)
	}
	return 0, false
}

// zstdWindowRoom is the window a zstd frame may ask for over its page's
// size: what an encoder that does not know its input's size takes at its
// usual levels.
const zstdWindowRoom = 8 << 20

// zstdWindow reads a zstd frame header's window size (RFC 8878,
// 3.1.1.1.2): the history its decoder allocates. A single-segment frame's
// is its content size.
func zstdWindow(data []byte) (int64, bool) {
	if len(data) < 6 || binary.LittleEndian.Uint32(data) != 0xFD2FB528 {
		return 0, false
	}
	if data[4]&0x20 != 0 {
		return zstdContentSize(data)
	}
	exp, mant := int64(data[5]>>3), int64(data[5]&7)
	base := int64(1) << (10 + exp)
	return base + base/8*mant, true
}

// checkCodec checks what a page's codec says of it against its header,
// before it is decompressed: no more bytes than the header says, and a
// zstd window no larger than the page (or an encoder's usual window).
func (p page) checkCodec(codec Codec) error {
	data := p.compressedPart()
	size := int64(p.h.uncompressed) - int64(p.levelBytes())
	if says, ok := declared(codec, data); ok && says > size {
		return fmt.Errorf("the page at byte %d of its chunk decompresses to %d bytes by its own word, over the %d its header says", p.at, says, size)
	}
	if codec == Zstd {
		if w, ok := zstdWindow(data); ok && w > max(size, zstdWindowRoom) {
			return fmt.Errorf("the page at byte %d of its chunk asks a zstd window of %d bytes, for %d bytes", p.at, w, size)
		}
	}
	return nil
}

// zstdContentSize reads a zstd frame header's Frame_Content_Size (RFC
// 8878, 3.1.1.1), where the frame has one.
func zstdContentSize(data []byte) (int64, bool) {
	if len(data) < 5 || binary.LittleEndian.Uint32(data) != 0xFD2FB528 {
		return 0, false
	}
	desc := data[4]
	fcsFlag, single, dictFlag := desc>>6, desc&0x20 != 0, desc&3
	at := 5
	if !single {
		at++ // Window_Descriptor
	}
	at += [4]int{0, 1, 2, 4}[dictFlag]
	size := [4]int{0, 2, 4, 8}[fcsFlag]
	if fcsFlag == 0 && single {
		size = 1
	}
	if size == 0 || len(data) < at+size {
		return 0, false
	}
	var fcs uint64
	for k := size - 1; k >= 0; k-- {
		fcs = fcs<<8 | uint64(data[at+k])
	}
	if size == 2 {
		fcs += 256
	}
	return int64(min(fcs, 1<<62)), true
}

// Span is a page of a chunk: where it is (its header's byte in the
// chunk, and its bytes, header included), the values it holds, and
// whether it is the chunk's dictionary. A chunk's spans let one row be
// read as its own page (and the dictionary, where there is one) rather
// than as the whole chunk.
type Span struct {
	At, Len int64
	Values  int64
	Dict    bool
}

// Spans walks a chunk's page headers into its pages' spans (its data
// and dictionary pages; an index page is no row's).
func Spans(raw []byte) ([]Span, error) {
	ps, err := pages(raw)
	if err != nil {
		return nil, err
	}
	spans := make([]Span, 0, len(ps))
	for k, p := range ps {
		end := int64(len(raw))
		if k+1 < len(ps) {
			end = int64(ps[k+1].at)
		}
		switch p.h.typ {
		case dictionaryPage:
			spans = append(spans, Span{At: int64(p.at), Len: end - int64(p.at), Dict: true})
		case dataPage, dataPageV2:
			spans = append(spans, Span{At: int64(p.at), Len: end - int64(p.at), Values: int64(p.h.values)})
		}
	}
	return spans, nil
}
