package pqfile

import (
	"encoding/binary"
	"fmt"
)

// Column is what decoding a chunk needs to know of its column.
type Column struct {
	Type   Type
	MaxDef int // a value is null where its level is under this
	Codec  Codec
}

// ColumnOf is leaf l's column, compressed with codec: an error where it
// is repeated (one value a row is read here).
func ColumnOf(l Leaf, codec Codec) (Column, error) {
	if l.MaxRep > 0 {
		return Column{}, fmt.Errorf("column %v is repeated", l.Path)
	}
	return Column{Type: l.Type, MaxDef: l.MaxDef, Codec: codec}, nil
}

// Decode decodes a column chunk's pages (raw: its bytes) and calls each
// with every value in order. rows is the row group's: the values its
// pages hold must be exactly that, checked before a page is decoded.
// limit bounds what its pages take decompressed, all told: a chunk past
// it is ErrTooBig before a byte is decompressed. Memory: the pages it
// decodes (at most limit), its dictionary, and nothing by a value count
// (runs are never expanded).
func Decode(raw []byte, col Column, rows, limit int64, each func(v Value) error) error {
	ps, err := pages(raw)
	if err != nil {
		return err
	}
	need, total, err := survey(ps, col.Codec)
	if err != nil {
		return err
	}
	if need > limit {
		return fmt.Errorf("its pages take %d bytes decompressed, over the %d it may (%w)", need, limit, ErrTooBig)
	}
	if total != rows {
		return fmt.Errorf("its pages hold %d values, its row group %d rows", total, rows)
	}
	var dict *dictionary
	room := limit
	for _, p := range ps {
		switch p.h.typ {
		case dictionaryPage:
			if dict != nil {
				return fmt.Errorf("the page at byte %d of its chunk: a second dictionary", p.at)
			}
			buf := make([]byte, p.h.uncompressed)
			if err := decompress(col.Codec, p.data, buf); err != nil {
				return fmt.Errorf("the dictionary page at byte %d of its chunk: %w", p.at, err)
			}
			if dict, err = readDictionary(col.Type, buf, int(p.h.values)); err != nil {
				return fmt.Errorf("the dictionary page at byte %d of its chunk: %w", p.at, err)
			}
		case dataPage, dataPageV2:
			if err := dataValues(p, col, dict, room, each); err != nil {
				return fmt.Errorf("the page at byte %d of its chunk: %w", p.at, err)
			}
		}
	}
	return nil
}

// dataValues decodes a data page's levels and values.
func dataValues(p page, col Column, dict *dictionary, room int64, each func(v Value) error) error {
	n := int(p.h.values)
	var levels, body []byte
	switch p.h.typ {
	case dataPage:
		buf := make([]byte, p.h.uncompressed)
		if err := decompress(col.Codec, p.data, buf); err != nil {
			return err
		}
		body = buf
		if col.MaxDef > 0 {
			if p.h.defEncoding != encRLE {
				return fmt.Errorf("definition levels in the %s encoding are not read here", encodingName(p.h.defEncoding))
			}
			if len(body) < 4 {
				return fmt.Errorf("its definition levels cut short")
			}
			k := int64(binary.LittleEndian.Uint32(body))
			if k > int64(len(body)-4) {
				return fmt.Errorf("definition levels of %d bytes in %d", k, len(body)-4)
			}
			levels, body = body[4:4+k], body[4+k:]
		}
	case dataPageV2:
		if p.h.repBytes != 0 {
			return fmt.Errorf("repetition levels in a column that repeats nothing")
		}
		lv := p.levelBytes()
		if lv > len(p.data) || lv > int(p.h.uncompressed) {
			return fmt.Errorf("levels of %d bytes in a page of %d", lv, len(p.data))
		}
		levels = p.data[:lv]
		body = p.data[lv:]
		if p.h.compressed {
			buf := make([]byte, int(p.h.uncompressed)-lv)
			if err := decompress(col.Codec, body, buf); err != nil {
				return err
			}
			body = buf
		} else if len(body) != int(p.h.uncompressed)-lv {
			return fmt.Errorf("%d bytes stored uncompressed, the header says %d", len(body), int(p.h.uncompressed)-lv)
		}
	}
	// Count the non-null values first: a values decoder checks its count
	// against its bytes.
	nonNull := n
	var defs *rle
	if col.MaxDef > 0 {
		var err error
		if defs, err = newRLE(levels, bitWidth(col.MaxDef)); err != nil {
			return err
		}
		count, _ := newRLE(levels, bitWidth(col.MaxDef))
		nonNull = 0
		for range n {
			l, err := count.next()
			if err != nil {
				return err
			}
			if int(l) > col.MaxDef {
				return fmt.Errorf("a definition level of %d, over the column's %d", l, col.MaxDef)
			}
			if int(l) == col.MaxDef {
				nonNull++
			}
		}
	}
	vals, err := newValues(col.Type, p.h.encoding, body, nonNull, dict, room)
	if err != nil {
		return err
	}
	for range n {
		if defs != nil {
			l, _ := defs.next()
			if int(l) < col.MaxDef {
				if err := each(Value{Null: true}); err != nil {
					return err
				}
				continue
			}
		}
		v, err := vals.next()
		if err != nil {
			return err
		}
		if err := each(v); err != nil {
			return err
		}
	}
	return nil
}
