package pqfile

import (
	"encoding/binary"
	"fmt"
)

// Encodings, as Parquet numbers them.
const (
	encPlain           = 0
	encPlainDictionary = 2
	encRLE             = 3
	encBitPacked       = 4
	encDeltaBinary     = 5
	encDeltaLength     = 6
	encDeltaByteArray  = 7
	encRLEDictionary   = 8
	encByteStreamSplit = 9
)

// Value is one row's value: an image's bytes (valid until the callback
// returns), or a label.
type Value struct {
	Null  bool
	Bytes []byte
	Int   int64
}

// values reads a page's non-null values one at a time.
type values interface {
	next() (Value, error)
}

// dictionary is a chunk's dictionary page, decoded.
type dictionary struct {
	bytes [][]byte
	ints  []int64
}

func (d *dictionary) len() int { return max(len(d.bytes), len(d.ints)) }

// newValues reads n values of type typ encoded as enc in b.
func newValues(typ Type, enc int32, b []byte, n int, dict *dictionary, room int64) (values, error) {
	switch enc {
	case encPlain:
		if typ == ByteArray {
			return &plainBytes{b: b}, nil
		}
		return newPlainInts(typ, b, n)
	case encPlainDictionary, encRLEDictionary:
		if dict == nil {
			return nil, fmt.Errorf("dictionary-encoded values without a dictionary page")
		}
		if len(b) == 0 {
			if n == 0 {
				return &dictValues{}, nil
			}
			return nil, fmt.Errorf("dictionary indexes without their bit width")
		}
		r, err := newRLE(b[1:], int(b[0]))
		if err != nil {
			return nil, err
		}
		return &dictValues{r: r, d: dict}, nil
	case encDeltaBinary:
		if typ == ByteArray {
			break
		}
		d, err := newDelta(b)
		if err != nil {
			return nil, err
		}
		return &deltaInts{d: d, typ: typ}, nil
	case encDeltaLength:
		if typ != ByteArray {
			break
		}
		return newDeltaLength(b, n)
	case encDeltaByteArray:
		if typ != ByteArray {
			break
		}
		return newDeltaByteArray(b, n, room)
	case encByteStreamSplit:
		if typ == ByteArray {
			break
		}
		w := intWidth(typ)
		if len(b) != n*w {
			return nil, fmt.Errorf("BYTE_STREAM_SPLIT: %d bytes for %d values of %d", len(b), n, w)
		}
		return &splitInts{b: b, n: n, w: w}, nil
	}
	return nil, fmt.Errorf("the %s encoding for %s values is not read here", encodingName(enc), typ)
}

func encodingName(enc int32) string {
	names := map[int32]string{encPlain: "PLAIN", encPlainDictionary: "PLAIN_DICTIONARY", encRLE: "RLE", encBitPacked: "BIT_PACKED",
		encDeltaBinary: "DELTA_BINARY_PACKED", encDeltaLength: "DELTA_LENGTH_BYTE_ARRAY", encDeltaByteArray: "DELTA_BYTE_ARRAY",
		encRLEDictionary: "RLE_DICTIONARY", encByteStreamSplit: "BYTE_STREAM_SPLIT"}
	if s, ok := names[enc]; ok {
		return s
	}
	return fmt.Sprintf("encoding %d", enc)
}

func intWidth(typ Type) int {
	if typ == Int32 {
		return 4
	}
	return 8
}

// readDictionary decodes a dictionary page of n PLAIN values: n is
// checked against the bytes first (a value takes 4 bytes at least).
func readDictionary(typ Type, b []byte, n int) (*dictionary, error) {
	if typ != ByteArray && typ != Int32 && typ != Int64 {
		return nil, fmt.Errorf("a dictionary of %s", typ)
	}
	// A value takes 4 bytes at least (a byte array's length, an INT32),
	// an INT64 8.
	width := 4
	if typ == Int64 {
		width = 8
	}
	if n > len(b)/width {
		return nil, fmt.Errorf("a dictionary of %d values in %d bytes", n, len(b))
	}
	d := &dictionary{}
	if typ == ByteArray {
		d.bytes = make([][]byte, 0, n)
		p := &plainBytes{b: b}
		for range n {
			v, err := p.next()
			if err != nil {
				return nil, fmt.Errorf("its dictionary: %w", err)
			}
			d.bytes = append(d.bytes, v.Bytes)
		}
		return d, nil
	}
	p, err := newPlainInts(typ, b, n)
	if err != nil {
		return nil, fmt.Errorf("its dictionary: %w", err)
	}
	d.ints = make([]int64, 0, n)
	for range n {
		v, _ := p.next()
		d.ints = append(d.ints, v.Int)
	}
	return d, nil
}

type plainBytes struct {
	b  []byte
	at int
}

func (p *plainBytes) next() (Value, error) {
	if len(p.b)-p.at < 4 {
		return Value{}, fmt.Errorf("PLAIN: a value's length cut short at byte %d", p.at)
	}
	n := int64(binary.LittleEndian.Uint32(p.b[p.at:]))
	p.at += 4
	if n > int64(len(p.b)-p.at) {
		return Value{}, fmt.Errorf("PLAIN: a value of %d bytes at byte %d of %d", n, p.at, len(p.b))
	}
	p.at += int(n)
	return Value{Bytes: p.b[p.at-int(n) : p.at]}, nil
}

type plainInts struct {
	b   []byte
	typ Type
}

func newPlainInts(typ Type, b []byte, n int) (*plainInts, error) {
	if n > len(b)/intWidth(typ) {
		return nil, fmt.Errorf("PLAIN: %d values of %s in %d bytes", n, typ, len(b))
	}
	return &plainInts{b: b, typ: typ}, nil
}

func (p *plainInts) next() (Value, error) {
	if p.typ == Int32 {
		v := int32(binary.LittleEndian.Uint32(p.b))
		p.b = p.b[4:]
		return Value{Int: int64(v)}, nil
	}
	v := int64(binary.LittleEndian.Uint64(p.b))
	p.b = p.b[8:]
	return Value{Int: v}, nil
}

type dictValues struct {
	r *rle
	d *dictionary
}

func (d *dictValues) next() (Value, error) {
	if d.r == nil {
		return Value{}, fmt.Errorf("dictionary indexes: none")
	}
	i, err := d.r.next()
	if err != nil {
		return Value{}, err
	}
	if int(i) >= d.d.len() {
		return Value{}, fmt.Errorf("dictionary index %d of a dictionary of %d", i, d.d.len())
	}
	if d.d.bytes != nil {
		return Value{Bytes: d.d.bytes[i]}, nil
	}
	return Value{Int: d.d.ints[i]}, nil
}

type splitInts struct {
	b    []byte
	n, w int
	i    int
}

func (s *splitInts) next() (Value, error) {
	var u uint64
	for k := s.w - 1; k >= 0; k-- {
		u = u<<8 | uint64(s.b[k*s.n+s.i])
	}
	s.i++
	if s.w == 4 {
		return Value{Int: int64(int32(uint32(u)))}, nil
	}
	return Value{Int: int64(u)}, nil
}

type deltaInts struct {
	d   *delta
	typ Type
}

func (d *deltaInts) next() (Value, error) {
	v, err := d.d.next()
	if d.typ == Int32 {
		v = int64(int32(v))
	}
	return Value{Int: v}, err
}

// delta reads DELTA_BINARY_PACKED integers one at a time.
type delta struct {
	b                   []byte
	at                  int
	block, minis, total uint64
	perMini             uint64
	first               bool
	prev                int64
	read                uint64 // values returned
	minDelta            int64
	widths              []byte // this block's miniblocks' widths
	mini                int    // the current miniblock
	inMini              uint64 // values read of it
	miniAt              uint64 // its first bit
}

func newDelta(b []byte) (*delta, error) {
	d := &delta{b: b, first: true}
	d.block, d.minis, d.total = d.uvarint(), d.uvarint(), d.uvarint()
	d.prev = d.varint()
	if d.at < 0 {
		return nil, fmt.Errorf("DELTA_BINARY_PACKED: a header cut short")
	}
	if d.block == 0 || d.block%128 != 0 || d.block > 1<<20 || d.minis == 0 || d.block%d.minis != 0 || (d.block/d.minis)%32 != 0 {
		return nil, fmt.Errorf("DELTA_BINARY_PACKED: blocks of %d values in %d miniblocks", d.block, d.minis)
	}
	d.perMini = d.block / d.minis
	return d, nil
}

func (d *delta) uvarint() uint64 {
	if d.at < 0 {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.at:])
	if n <= 0 {
		d.at = -1
		return 0
	}
	d.at += n
	return v
}

func (d *delta) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *delta) next() (int64, error) {
	if d.read >= d.total {
		return 0, fmt.Errorf("DELTA_BINARY_PACKED: more values asked than its %d", d.total)
	}
	d.read++
	if d.first {
		d.first = false
		return d.prev, nil
	}
	if d.widths == nil || (d.mini == len(d.widths)-1 && d.inMini == d.perMini) {
		d.minDelta = d.varint()
		if d.at < 0 || uint64(len(d.b)-d.at) < d.minis {
			return 0, fmt.Errorf("DELTA_BINARY_PACKED: a block header cut short")
		}
		d.widths = d.b[d.at : d.at+int(d.minis)]
		d.at += int(d.minis)
		d.mini, d.inMini, d.miniAt = 0, 0, uint64(d.at)*8
		if err := d.startMini(); err != nil {
			return 0, err
		}
	} else if d.inMini == d.perMini {
		d.mini++
		d.inMini = 0
		if err := d.startMini(); err != nil {
			return 0, err
		}
	}
	w := uint(d.widths[d.mini])
	u := uint64(bits64(d.b, d.miniAt+d.inMini*uint64(w), w))
	d.inMini++
	d.prev += d.minDelta + int64(u)
	return d.prev, nil
}

// startMini checks the current miniblock's bytes and moves past them.
func (d *delta) startMini() error {
	w := uint64(d.widths[d.mini])
	if w > 64 {
		return fmt.Errorf("DELTA_BINARY_PACKED: a miniblock of %d bits", w)
	}
	size := d.perMini * w / 8
	if size > uint64(len(d.b)-d.at) {
		return fmt.Errorf("DELTA_BINARY_PACKED: a miniblock of %d bytes in the %d left", size, len(d.b)-d.at)
	}
	d.miniAt = uint64(d.at) * 8
	d.at += int(size)
	return nil
}

// end is where the values end: after the last miniblock read.
func (d *delta) end() int { return d.at }

// bits64 reads width (≤ 64) bits of b from bit at, least significant first.
func bits64(b []byte, at uint64, width uint) uint64 {
	lo := uint64(bits(b, at, min(width, 32)))
	if width <= 32 {
		return lo
	}
	return lo | uint64(bits(b, at+32, width-32))<<32
}

// deltaLength is DELTA_LENGTH_BYTE_ARRAY: the lengths, then the bytes.
type deltaLength struct {
	lens []int64
	data []byte
	i    int
}

func newDeltaLength(b []byte, n int) (*deltaLength, error) {
	d, err := newDelta(b)
	if err != nil {
		return nil, err
	}
	if d.total != uint64(n) {
		return nil, fmt.Errorf("DELTA_LENGTH_BYTE_ARRAY: %d lengths for %d values", d.total, n)
	}
	lens := make([]int64, n)
	var sum int64
	for i := range lens {
		if lens[i], err = d.next(); err != nil {
			return nil, err
		}
		if lens[i] < 0 || lens[i] > int64(len(b)) {
			return nil, fmt.Errorf("DELTA_LENGTH_BYTE_ARRAY: a length of %d", lens[i])
		}
		sum += lens[i]
	}
	rest := b[d.end():]
	if sum > int64(len(rest)) {
		return nil, fmt.Errorf("DELTA_LENGTH_BYTE_ARRAY: %d bytes of values in %d", sum, len(rest))
	}
	return &deltaLength{lens: lens, data: rest}, nil
}

func (d *deltaLength) next() (Value, error) {
	n := d.lens[d.i]
	d.i++
	v := d.data[:n]
	d.data = d.data[n:]
	return Value{Bytes: v}, nil
}

// deltaByteArray is DELTA_BYTE_ARRAY: prefix lengths, then suffixes; a
// value is the one before's prefix and its suffix. What the values take
// in all is bounded by room (a prefix repeated builds any size).
type deltaByteArray struct {
	prefix   []int64
	suffixes *deltaLength
	prev     []byte
	room     int64
	i        int
}

func newDeltaByteArray(b []byte, n int, room int64) (*deltaByteArray, error) {
	d, err := newDelta(b)
	if err != nil {
		return nil, err
	}
	if d.total != uint64(n) {
		return nil, fmt.Errorf("DELTA_BYTE_ARRAY: %d prefixes for %d values", d.total, n)
	}
	prefix := make([]int64, n)
	for i := range prefix {
		if prefix[i], err = d.next(); err != nil {
			return nil, err
		}
	}
	s, err := newDeltaLength(b[d.end():], n)
	if err != nil {
		return nil, fmt.Errorf("DELTA_BYTE_ARRAY's suffixes: %w", err)
	}
	return &deltaByteArray{prefix: prefix, suffixes: s, room: room}, nil
}

func (d *deltaByteArray) next() (Value, error) {
	p := d.prefix[d.i]
	d.i++
	sv, _ := d.suffixes.next()
	s := sv.Bytes
	if p < 0 || p > int64(len(d.prev)) {
		return Value{}, fmt.Errorf("DELTA_BYTE_ARRAY: a prefix of %d of a value of %d", p, len(d.prev))
	}
	if d.room -= p + int64(len(s)); d.room < 0 {
		return Value{}, fmt.Errorf("DELTA_BYTE_ARRAY: values of more than the room given them (%w)", ErrTooBig)
	}
	v := make([]byte, 0, p+int64(len(s)))
	v = append(append(v, d.prev[:p]...), s...)
	d.prev = v
	return Value{Bytes: v}, nil
}
