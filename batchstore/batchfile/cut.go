package batchfile

import (
	"fmt"
	"io"
	"sort"
)

// Part is a run of samples [From, To) of one batch file.
type Part struct {
	Header *Header
	Data   io.ReaderAt // the file; read only by Composite.ReadAt
	From   int
	To     int
}

// Composite is a batch file cut from parts of others: a header of its
// own, then each tensor's rows read at read time from the parts (and
// ragged offsets made anew). Nothing is copied until a reader asks.
type Composite struct {
	header  []byte
	extents []extent // sorted by at, covering header end .. size
	size    int64
}

type extent struct {
	at   int64       // offset in the composite
	src  io.ReaderAt // nil: bytes
	off  int64       // offset in src
	n    int64
	data []byte // when src is nil
}

// Cut lays out a file of parts' samples, in order, with metadata meta.
// Every part must have the first part's tensors (names, dtypes, the
// dimensions after the first, which are ragged).
func Cut(parts []Part, meta map[string]string) (*Composite, error) { return cut(parts, meta, 0) }

// cut is Cut with the data starting at dataStart or later.
func cut(parts []Part, meta map[string]string, dataStart int64) (*Composite, error) {
	layout, err := cutLayout(parts)
	if err != nil {
		return nil, err
	}
	out := &Header{Meta: meta}
	var at int64
	for _, t := range layout {
		t.Begin, at = at, at+t.bytes()
		t.End = at
		out.Tensors = append(out.Tensors, t.Tensor)
	}
	c := &Composite{header: out.EncodeAtLeast(PageSize, dataStart)}
	pos := out.DataStart
	add := func(e extent) {
		if e.n > 0 {
			e.at = pos
			c.extents = append(c.extents, e)
			pos += e.n
		}
	}
	for _, t := range layout {
		if t.values != nil {
			data := Int64s(t.values...)
			add(extent{data: data, n: int64(len(data))})
			continue
		}
		for _, r := range t.runs {
			p := parts[r.part]
			add(extent{src: p.Data, off: p.Header.DataStart + r.off, n: r.n})
		}
	}
	c.size = pos
	return c, nil
}

// DataStart is where the composite's data begins.
func (c *Composite) DataStart() int64 { return int64(len(c.header)) }

// Size is the composite's length.
func (c *Composite) Size() int64 { return c.size }

// ReadAt implements io.ReaderAt.
func (c *Composite) ReadAt(p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) && off < c.size {
		n, err := c.readSome(p[done:], off)
		if err != nil {
			return done, err
		}
		done += n
		off += int64(n)
	}
	if done < len(p) {
		return done, io.EOF
	}
	return done, nil
}

// readSome reads from the one region that holds off.
func (c *Composite) readSome(p []byte, off int64) (int, error) {
	if off < int64(len(c.header)) {
		return copy(p, c.header[off:]), nil
	}
	i := sort.Search(len(c.extents), func(i int) bool { return c.extents[i].at+c.extents[i].n > off })
	if i == len(c.extents) || c.extents[i].at > off {
		return 0, fmt.Errorf("composite: no data at offset %d", off)
	}
	e := c.extents[i]
	rel := off - e.at
	want := min(int64(len(p)), e.n-rel)
	if e.src == nil {
		return copy(p[:want], e.data[rel:]), nil
	}
	n, err := e.src.ReadAt(p[:want], e.off+rel)
	if n == int(want) {
		err = nil
	}
	return n, err
}

// Bytes reads the whole composite into memory.
func (c *Composite) Bytes() ([]byte, error) {
	buf := make([]byte, c.size)
	_, err := c.ReadAt(buf, 0)
	return buf, err
}
