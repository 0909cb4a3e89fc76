package pqfile

import (
	"errors"
	"fmt"
	"strings"
)

// Type is a column's physical type, as Parquet numbers them.
type Type int32

// The physical types a served column may have.
const (
	Int32     Type = 1
	Int64     Type = 2
	ByteArray Type = 6
)

func (t Type) String() string {
	switch t {
	case 0:
		return "BOOLEAN"
	case Int32:
		return "INT32"
	case Int64:
		return "INT64"
	case 3:
		return "INT96"
	case 4:
		return "FLOAT"
	case 5:
		return "DOUBLE"
	case ByteArray:
		return "BYTE_ARRAY"
	case 7:
		return "FIXED_LEN_BYTE_ARRAY"
	}
	return fmt.Sprintf("type %d", int32(t))
}

// Leaf is a column: a leaf of the schema, in the order of the row
// groups' column chunks.
type Leaf struct {
	Path   []string
	Type   Type
	MaxDef int // optional fields on its path, itself included
	MaxRep int // repeated fields on its path
	Index  int // its column chunk's place in a row group
}

// Footer is what a file's footer says, walked: the schema's leaves, the
// rows, the key-value metadata; its row groups are walked when asked for
// (Groups), keeping what the caller wants of them.
type Footer struct {
	Rows   int64
	Leaves []Leaf
	kv     map[string]string
	groups []byte // the row_groups field's value, compact protocol
}

// ErrFooter wraps what is wrong with a footer.
var ErrFooter = errors.New("footer")

// maxLeaves bounds a schema: ten thousand columns is a wide table.
const maxLeaves = 1 << 16

// ParseFooter walks a footer's bytes (the FileMetaData, without its
// length and magic).
func ParseFooter(b []byte) (*Footer, error) {
	r := &reader{b: b}
	f := &Footer{}
	var schema []byte
	var kv []byte
	seen := map[int16]bool{}
	r.each(func(id int16, typ byte) bool {
		if seen[id] {
			r.fail("field %d twice", id)
			return true
		}
		seen[id] = true
		switch {
		case id == 2 && typ == tList:
			from := r.at
			r.skip(typ)
			schema = b[from:r.at]
		case id == 3:
			f.Rows = r.int(typ)
		case id == 4 && typ == tList:
			from := r.at
			r.skip(typ)
			f.groups = b[from:r.at]
		case id == 5 && typ == tList:
			from := r.at
			r.skip(typ)
			kv = b[from:r.at]
		default:
			return false
		}
		return true
	})
	if r.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFooter, r.err)
	}
	if schema == nil || !seen[3] || f.groups == nil {
		return nil, fmt.Errorf("%w: no schema, row count or row groups", ErrFooter)
	}
	if f.Rows < 0 {
		return nil, fmt.Errorf("%w: %d rows", ErrFooter, f.Rows)
	}
	var err error
	if f.Leaves, err = leaves(schema); err != nil {
		return nil, fmt.Errorf("%w: its schema: %v", ErrFooter, err)
	}
	if f.kv, err = keyValues(kv); err != nil {
		return nil, fmt.Errorf("%w: its key-value metadata: %v", ErrFooter, err)
	}
	return f, nil
}

// element is a schema element: a field, with its children after it.
type element struct {
	name     string
	typ      Type
	hasType  bool
	rep      int32 // 0 required, 1 optional, 2 repeated
	children int
}

// leaves turns the schema's elements (depth first, each group followed
// by its children) into its leaf columns.
func leaves(b []byte) ([]Leaf, error) {
	r := &reader{b: b}
	elem, n := r.list()
	if r.err == nil && elem != tStruct {
		r.fail("schema elements of type %d", elem)
	}
	els := make([]element, 0, n)
	for range n {
		var e element
		r.each(func(id int16, typ byte) bool {
			switch id {
			case 1:
				e.typ, e.hasType = Type(r.int(typ)), true
			case 3:
				e.rep = int32(r.int(typ))
			case 4:
				if typ != tBinary {
					return false
				}
				e.name = string(r.binary())
			case 5:
				c := r.int(typ)
				if c < 0 || c > int64(n) {
					r.fail("%d children in a schema of %d", c, n)
				}
				e.children = int(c)
			default:
				return false
			}
			return true
		})
		if r.err != nil {
			return nil, r.err
		}
		els = append(els, e)
	}
	if len(els) == 0 {
		return nil, errors.New("no root")
	}
	var out []Leaf
	// walk from the root's children; the root itself is no field.
	type frame struct {
		left     int
		path     []string
		def, rep int
	}
	stack := []frame{{left: els[0].children}}
	for _, e := range els[1:] {
		for len(stack) > 0 && stack[len(stack)-1].left == 0 {
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			return nil, errors.New("more elements than the root's fields hold")
		}
		top := &stack[len(stack)-1]
		top.left--
		path := append(append([]string(nil), top.path...), e.name)
		def, rep := top.def, top.rep
		switch e.rep {
		case 1:
			def++
		case 2:
			def++
			rep++
		}
		if e.children > 0 {
			if len(stack) > maxDepth {
				return nil, fmt.Errorf("nested over %d deep", maxDepth)
			}
			stack = append(stack, frame{left: e.children, path: path, def: def, rep: rep})
			continue
		}
		if !e.hasType {
			return nil, fmt.Errorf("field %s has neither a type nor fields", strings.Join(path, "."))
		}
		if len(out) >= maxLeaves {
			return nil, fmt.Errorf("over %d columns", maxLeaves)
		}
		out = append(out, Leaf{Path: path, Type: e.typ, MaxDef: def, MaxRep: rep, Index: len(out)})
	}
	for _, fr := range stack {
		if fr.left != 0 {
			return nil, errors.New("fewer elements than the groups' fields")
		}
	}
	return out, nil
}

// keyValues reads the key-value metadata.
func keyValues(b []byte) (map[string]string, error) {
	kv := map[string]string{}
	if b == nil {
		return kv, nil
	}
	r := &reader{b: b}
	elem, n := r.list()
	if r.err == nil && elem != tStruct {
		r.fail("key-values of type %d", elem)
	}
	for range n {
		var k, v []byte
		r.each(func(id int16, typ byte) bool {
			if typ != tBinary || id < 1 || id > 2 {
				return false
			}
			if id == 1 {
				k = r.binary()
			} else {
				v = r.binary()
			}
			return true
		})
		if r.err != nil {
			return nil, r.err
		}
		kv[string(k)] = string(v)
	}
	return kv, nil
}

// Lookup is the key-value metadata's value of key.
func (f *Footer) Lookup(key string) (string, bool) {
	v, ok := f.kv[key]
	return v, ok
}

// Leaf finds the leaf column of a dotted path.
func (f *Footer) Leaf(path ...string) (Leaf, bool) {
	for _, l := range f.Leaves {
		if strings.Join(l.Path, "\x00") == strings.Join(path, "\x00") {
			return l, true
		}
	}
	return Leaf{}, false
}

// Codec is a column chunk's compression, as Parquet numbers them.
type Codec int32

// The codecs.
const (
	Uncompressed Codec = 0
	Snappy       Codec = 1
	Gzip         Codec = 2
	LZO          Codec = 3
	Brotli       Codec = 4
	LZ4          Codec = 5 // Hadoop's framing, deprecated
	Zstd         Codec = 6
	LZ4Raw       Codec = 7
)

func (c Codec) String() string {
	if c >= 0 && int(c) < len(codecNames) {
		return codecNames[c]
	}
	return fmt.Sprintf("codec %d", int32(c))
}

var codecNames = [...]string{"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"}

// Chunk is a row group's column chunk: where its pages are and what its
// footer says of them (only Off and Size are checked, by Groups; the
// rest is the file's word, to be checked against the pages).
type Chunk struct {
	Codec        Codec
	Off, Size    int64 // its pages' bytes in the file
	Uncompressed int64
	Values       int64
}

// Group is a row group: its rows, and the chunks of the columns asked.
type Group struct {
	Rows   int64
	Chunks []Chunk // in the order the columns were asked
}

// Groups walks the row groups, calling each with each one's rows and
// the chunks of cols (leaf indexes); a group lacking one of them, or a
// chunk in another file, is an error. Nothing of a group is kept past
// its call.
func (f *Footer) Groups(cols []int, each func(g int, grp Group) error) error {
	r := &reader{b: f.groups}
	elem, n := r.list()
	if r.err == nil && elem != tStruct {
		r.fail("row groups of type %d", elem)
	}
	grp := Group{Chunks: make([]Chunk, len(cols))}
	for g := range n {
		if r.err != nil {
			break
		}
		grp.Rows = -1
		found := 0
		r.each(func(id int16, typ byte) bool {
			switch {
			case id == 1 && typ == tList:
				found += groupColumns(r, cols, grp.Chunks)
			case id == 3:
				grp.Rows = r.int(typ)
			default:
				return false
			}
			return true
		})
		if r.err != nil {
			return fmt.Errorf("%w: row group %d: %v", ErrFooter, g, r.err)
		}
		if grp.Rows < 0 {
			return fmt.Errorf("%w: row group %d: no row count", ErrFooter, g)
		}
		if found != len(cols) {
			return fmt.Errorf("%w: row group %d: %d of its columns are missing", ErrFooter, g, len(cols)-found)
		}
		if err := each(g, grp); err != nil {
			return err
		}
	}
	if r.err != nil {
		return fmt.Errorf("%w: %v", ErrFooter, r.err)
	}
	return nil
}

// groupColumns reads a row group's column chunks, filling chunks[k] for
// the chunk of leaf cols[k]; it returns how many it filled.
func groupColumns(r *reader, cols []int, chunks []Chunk) int {
	elem, n := r.list()
	if r.err == nil && elem != tStruct {
		r.fail("column chunks of type %d", elem)
		return 0
	}
	found := 0
	for c := range n {
		k := -1
		for i, col := range cols {
			if col == c {
				k = i
			}
		}
		if k < 0 {
			r.skip(tStruct)
			continue
		}
		ch := Chunk{Off: -1}
		dict := int64(0)
		meta := false
		r.each(func(id int16, typ byte) bool {
			switch {
			case id == 1 && typ == tBinary:
				if p := r.binary(); len(p) > 0 {
					r.fail("column %d is in another file (%q)", c, p)
				}
			case id == 3 && typ == tStruct:
				meta = true
				r.each(func(id int16, typ byte) bool {
					switch id {
					case 4:
						ch.Codec = Codec(r.int(typ))
					case 5:
						ch.Values = r.int(typ)
					case 6:
						ch.Uncompressed = r.int(typ)
					case 7:
						ch.Size = r.int(typ)
					case 9:
						ch.Off = r.int(typ)
					case 11:
						dict = r.int(typ)
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
			return found
		}
		if !meta {
			r.fail("column %d has no metadata", c)
			return found
		}
		// A dictionary page comes before the data pages it serves; 0 is
		// what some writers put for none.
		if dict > 0 && dict < ch.Off {
			ch.Off = dict
		}
		chunks[k] = ch
		found++
	}
	return found
}
