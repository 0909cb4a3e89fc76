package pqfile

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Thrift's compact protocol, as Parquet's metadata is written: a reader
// that walks fields in place, skipping what is not asked for without
// allocating it. Every length is checked against the bytes left.

// Compact protocol types.
const (
	tStop   = 0
	tTrue   = 1
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12
)

// maxDepth bounds nesting: Parquet's metadata is a few levels deep.
const maxDepth = 32

var errThrift = errors.New("thrift")

// reader walks compact-protocol bytes.
type reader struct {
	b     []byte
	at    int
	err   error
	depth int
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: at byte %d: %s", errThrift, r.at, fmt.Sprintf(format, args...))
	}
}

func (r *reader) byte1() byte {
	if r.err != nil {
		return 0
	}
	if r.at >= len(r.b) {
		r.fail("cut short")
		return 0
	}
	r.at++
	return r.b[r.at-1]
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.at:])
	if n <= 0 {
		r.fail("a bad varint")
		return 0
	}
	r.at += n
	return v
}

func (r *reader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// i32 reads an integer field of any width as an int32 value's range.
func (r *reader) i32() int32 {
	v := r.varint()
	if v < -1<<31 || v >= 1<<31 {
		r.fail("%d is out of a 32-bit field's range", v)
		return 0
	}
	return int32(v)
}

// binary reads a length and as many bytes (in place, not copied).
func (r *reader) binary() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.at) {
		r.fail("%d bytes said, %d left", n, len(r.b)-r.at)
		return nil
	}
	r.at += int(n)
	return r.b[r.at-int(n) : r.at]
}

// list reads a list or set header: its element type and count, the
// count checked against the bytes left (an element takes one at least).
func (r *reader) list() (elem byte, n int) {
	h := r.byte1()
	elem, size := h&0x0f, uint64(h>>4)
	if size == 15 {
		size = r.uvarint()
	}
	if r.err == nil && size > uint64(len(r.b)-r.at) {
		r.fail("a list of %d in %d bytes", size, len(r.b)-r.at)
	}
	if r.err != nil {
		return 0, 0
	}
	return elem, int(size)
}

// each walks a struct's fields, calling f with each field's id and type;
// f reads the value or returns false to have it skipped.
func (r *reader) each(f func(id int16, typ byte) bool) {
	if r.depth++; r.depth > maxDepth {
		r.fail("nested over %d deep", maxDepth)
	}
	defer func() { r.depth-- }()
	var id int16
	for r.err == nil {
		h := r.byte1()
		typ := h & 0x0f
		if typ == tStop {
			return
		}
		if d := h >> 4; d != 0 {
			id += int16(d)
		} else {
			v := r.varint()
			if v < -1<<15 || v >= 1<<15 {
				r.fail("field id %d", v)
				return
			}
			id = int16(v)
		}
		if !f(id, typ) {
			r.skip(typ)
		}
	}
}

// boolean reads a field's boolean: the value is in its type.
func (r *reader) boolean(typ byte) bool { return typ == tTrue }

// skip passes over a value of type typ.
func (r *reader) skip(typ byte) {
	switch typ {
	case tTrue, tFalse:
	case tByte:
		r.byte1()
	case tI16, tI32, tI64:
		r.uvarint()
	case tDouble:
		if len(r.b)-r.at < 8 {
			r.fail("cut short")
			return
		}
		r.at += 8
	case tBinary:
		r.binary()
	case tList, tSet:
		elem, n := r.list()
		for range n {
			if r.err != nil {
				return
			}
			if elem == tTrue || elem == tFalse {
				r.byte1() // a list's booleans take a byte each
				continue
			}
			r.skip(elem)
		}
	case tMap:
		n := r.uvarint()
		if n == 0 || r.err != nil {
			return
		}
		if n > uint64(len(r.b)-r.at) {
			r.fail("a map of %d in %d bytes", n, len(r.b)-r.at)
			return
		}
		kv := r.byte1()
		for range n {
			if r.err != nil {
				return
			}
			r.skip(kv >> 4)
			r.skip(kv & 0x0f)
		}
	case tStruct:
		r.each(func(int16, byte) bool { return false })
	default:
		r.fail("unknown type %d", typ)
	}
}

// int reads an integer field's value as int64 (i16, i32, i64 alike).
func (r *reader) int(typ byte) int64 {
	if typ != tI16 && typ != tI32 && typ != tI64 && typ != tByte {
		r.fail("an integer field of type %d", typ)
		return 0
	}
	if typ == tByte {
		return int64(int8(r.byte1()))
	}
	return r.varint()
}
