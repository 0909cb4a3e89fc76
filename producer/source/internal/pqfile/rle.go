package pqfile

import (
	"encoding/binary"
	"fmt"
)

// rle reads Parquet's RLE/bit-packed hybrid encoding a value at a time:
// a run is never expanded, so a run of 2^30 levels costs nothing until
// its values are asked for, one by one, and never more than asked.
type rle struct {
	b     []byte
	width uint // bits a value, 0 to 32
	at    int  // the next header's byte
	run   uint64
	val   uint32
	left  uint64 // bit-packed values left in the current groups
	bit   uint64 // the next bit-packed value's first bit in b
}

func newRLE(b []byte, width int) (*rle, error) {
	if width < 0 || width > 32 {
		return nil, fmt.Errorf("a bit width of %d", width)
	}
	return &rle{b: b, width: uint(width)}, nil
}

// next is the next value.
func (r *rle) next() (uint32, error) {
	for r.run == 0 && r.left == 0 {
		if r.at >= len(r.b) {
			return 0, fmt.Errorf("levels or indexes: fewer values than the page says")
		}
		h, n := binary.Uvarint(r.b[r.at:])
		if n <= 0 {
			return 0, fmt.Errorf("levels or indexes: a bad run header at byte %d", r.at)
		}
		r.at += n
		if h&1 == 1 { // groups of 8 bit-packed values
			groups := h >> 1
			r.bit = uint64(r.at) * 8
			room := uint64(len(r.b) - r.at)
			switch {
			case r.width == 0:
				r.left = min(groups, 1<<40) * 8
			case groups > room || groups*uint64(r.width) > room:
				// A last group cut short, as some writers leave it:
				// its values are read as far as its bytes go.
				r.left, r.at = room*8/uint64(r.width), len(r.b)
			default:
				r.left = groups * 8
				r.at += int(groups * uint64(r.width))
			}
			continue
		}
		r.run = h >> 1
		w := int(r.width+7) / 8
		if w > len(r.b)-r.at {
			return 0, fmt.Errorf("levels or indexes: a run's value cut short at byte %d", r.at)
		}
		var v uint32
		for k := w - 1; k >= 0; k-- {
			v = v<<8 | uint32(r.b[r.at+k])
		}
		r.at += w
		if r.width < 32 && v>>r.width != 0 {
			return 0, fmt.Errorf("levels or indexes: a run of %d, wider than %d bits", v, r.width)
		}
		r.val = v
	}
	if r.run > 0 {
		r.run--
		return r.val, nil
	}
	r.left--
	v := bits(r.b, r.bit, r.width)
	r.bit += uint64(r.width)
	return v, nil
}

// bits reads width bits of b from bit at, least significant first;
// bits past b read as 0.
func bits(b []byte, at uint64, width uint) uint32 {
	var v uint64
	for k := uint(0); k < width; {
		i := at / 8
		if i >= uint64(len(b)) {
			break
		}
		off := uint(at % 8)
		take := min(8-off, width-k)
		v |= uint64(b[i]>>off&(1<<take-1)) << k
		k += take
		at += uint64(take)
	}
	return uint32(v)
}

// bitWidth is the bits a value up to max takes.
func bitWidth(max int) int {
	w := 0
	for max > 0 {
		w++
		max >>= 1
	}
	return w
}
