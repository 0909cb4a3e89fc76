package source

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tsock/tsock/producer/source/internal/pqfile"
)

// Parquet files, as the Hugging Face Hub publishes image datasets: each
// row an image (a struct of bytes and path, or plain binary) and a
// label, the class names in the file's "huggingface" metadata. They are
// served by the shards' machinery (Shards): a file plays the shard's
// part (its version, its index), and a row group's image column chunk is
// a piece, read in one request and decoded once when it arrives; only
// the image column's bytes are read in an epoch, and the labels' once,
// at indexing, with the footer (both kept in the index file).

// IsParquetSpec says whether a --source value names Parquet files: a
// path, glob or brace pattern ending in .parquet.
func IsParquetSpec(spec string) bool { return strings.HasSuffix(spec, ".parquet") }

// Hub's column names.
const (
	defaultImageColumn = "image"
	defaultLabelColumn = "label"
)

// parquetTail is how much of a file's end indexing reads first: the
// footer of a file of some hundred row groups, in one request.
const parquetTail = 64 << 10

// maxFooter bounds a footer: a file of thousands of row groups has one
// of a few megabytes; one that claims more is not believed.
const maxFooter = 64 << 20

// parquetShard is what serving one Parquet file needs, from its footer:
// the image column and each row group's chunk of it. Nothing else of
// the footer is kept (a footer of half a million empty row groups keeps
// nothing of them).
type parquetShard struct {
	mu     sync.Mutex    // guards groups' spans, learnt as rows are read alone
	image  pqfile.Column // its codec is each chunk's
	groups []rowGroup    // the row groups that hold rows, in order
	rows   int64
	label  int // the label column's leaf index; -1: none (every label 0)
	// labelCol is the label column, and labels each row group's label
	// chunk: indexing reads them, and drops labels once read.
	labelCol pqfile.Column
	cols     []int // the leaves walked in the row groups: the image's, the label's
	labels   []pqfile.Chunk
	cut      error  // where the footer stops being believed: the rest of the file left out
	hub      string // the Hub's metadata ("huggingface"), read for the class names
	footer   []byte // the file's footer, its length and magic: what the index file keeps
}

// rowGroup is a row group that holds rows: its first row in its file,
// its rows, its number in the file (for messages) and its image chunk.
type rowGroup struct {
	first, rows int64
	num         int32
	chunk       pqfile.Chunk
	// spans are its chunk's pages, once a row of it was read alone (the
	// whole chunk, that time): a later row alone is its own page. Guarded
	// by the file's mu.
	spans []pqfile.Span
}

// errNotParquet wraps what a file's own bytes say is wrong with it.
var errNotParquet = errors.New("not a usable Parquet file")

// unusable: a Parquet file whose footer reads but whose columns are not
// what is wanted: its rows, all left out.
type unusable struct {
	rows int64
	err  error
}

func (u *unusable) Error() string { return u.err.Error() }

func (u *unusable) Unwrap() error { return u.err }

// openParquet walks a file's footer (tail holds the file's last bytes,
// footer included) and finds the columns cols names, keeping each row
// group's image chunk and, for indexing, its label chunk.
func openParquet(tail []byte, size int64, cols Columns) (*parquetShard, error) {
	if len(tail) < 8 || string(tail[len(tail)-4:]) != "PAR1" {
		return nil, fmt.Errorf("%w: no Parquet magic at its end (truncated, or another format)", errNotParquet)
	}
	n := int64(binary.LittleEndian.Uint32(tail[len(tail)-8:]))
	if n+12 > size || n > maxFooter {
		return nil, fmt.Errorf("%w: a footer of %d bytes in a file of %d", errNotParquet, n, size)
	}
	if n+8 > int64(len(tail)) {
		return nil, errShortTail{need: n + 8}
	}
	footer := tail[int64(len(tail))-n-8:]
	f, err := pqfile.ParseFooter(footer[:n])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotParquet, err)
	}
	pq := &parquetShard{footer: footer, rows: f.Rows}
	pq.hub, _ = f.Lookup("huggingface")
	if err := pq.find(f, cols); err != nil {
		return nil, &unusable{rows: f.Rows, err: err}
	}
	if err := pq.checkGroups(f, size-n-8); err != nil {
		return nil, err
	}
	return pq, nil
}

// errShortTail: the footer is longer than the tail read; read need bytes.
type errShortTail struct{ need int64 }

func (e errShortTail) Error() string { return fmt.Sprintf("footer needs the last %d bytes", e.need) }

// find sets the image column, and checks the label column, as cols name
// them: flat (no repeated field on the way), of the right type.
func (pq *parquetShard) find(f *pqfile.Footer, cols Columns) error {
	image, ok := leaf(f, cols.image(), "bytes")
	if !ok {
		return fmt.Errorf("%w: no image column %q (its columns: %s; --columns image=NAME names another)", errNotParquet, cols.image(), columnNames(f))
	}
	if err := flat(image, "image", pqfile.ByteArray); err != nil {
		return err
	}
	pq.image, _ = pqfile.ColumnOf(image, 0)
	pq.label, pq.cols = -1, []int{image.Index}
	if cols.NoLabel {
		return nil
	}
	label, ok := leaf(f, cols.label(), "")
	if !ok {
		if under := columnsUnder(f, cols.label()); under != "" {
			return fmt.Errorf("%w: the label column %s is nested (%s); one integer a row is wanted", errNotParquet, cols.label(), under)
		}
		if cols.Label == "" { // the Hub's name, absent: a dataset without labels
			return nil
		}
		return fmt.Errorf("%w: no label column %q (its columns: %s)", errNotParquet, cols.label(), columnNames(f))
	}
	if err := flat(label, "label", pqfile.Int64, pqfile.Int32); err != nil {
		return err
	}
	pq.label = label.Index
	pq.labelCol, _ = pqfile.ColumnOf(label, 0)
	pq.cols = append(pq.cols, label.Index)
	return nil
}

// leaf finds the leaf column name (dotted: a nested field) or, where
// name is a group, its field inner (the Hub's image struct's bytes).
func leaf(f *pqfile.Footer, name, inner string) (pqfile.Leaf, bool) {
	path := strings.Split(name, ".")
	if l, ok := f.Leaf(path...); ok {
		return l, true
	}
	if inner != "" {
		return f.Leaf(append(path, inner)...)
	}
	return pqfile.Leaf{}, false
}

// flat checks that l is of one of kinds and holds one value a row: a
// repeated field (a list) where one value is wanted is refused.
func flat(l pqfile.Leaf, what string, kinds ...pqfile.Type) error {
	if l.MaxRep > 0 {
		return fmt.Errorf("%w: the %s column %s is repeated (a list); one value a row is wanted", errNotParquet, what, strings.Join(l.Path, "."))
	}
	if !slices.Contains(kinds, l.Type) {
		return fmt.Errorf("%w: the %s column %s is %s, not %s", errNotParquet, what, strings.Join(l.Path, "."), l.Type, kinds[0])
	}
	return nil
}

// columnsUnder names the leaf columns inside group name, "" if none.
func columnsUnder(f *pqfile.Footer, name string) string {
	var under []string
	for _, l := range f.Leaves {
		if p := strings.Join(l.Path, "."); strings.HasPrefix(p+".", name+".") {
			under = append(under, p)
		}
	}
	return strings.Join(under, ", ")
}

func columnNames(f *pqfile.Footer) string {
	var names []string
	for _, l := range f.Leaves {
		names = append(names, strings.Join(l.Path, "."))
	}
	return strings.Join(names, ", ")
}

// checkGroups walks the row groups, checking what the footer says of
// them against the file: every column chunk read within the data (before
// the footer, at dataEnd), rows that add up, and no more rows than its
// image chunk has bytes (a row's image takes one at least: a footer
// claiming ten million rows over a few bytes is its lie, refused before
// a row of it is made). It keeps the groups that hold rows.
func (pq *parquetShard) checkGroups(f *pqfile.Footer, dataEnd int64) error {
	var rows int64
	err := f.Groups(pq.cols, func(g int, grp pqfile.Group) error {
		if grp.Rows < 0 || grp.Rows > maxGroupRows {
			return fmt.Errorf("%w: row group %d: the footer says %d rows", errNotParquet, g, grp.Rows)
		}
		for k, ch := range grp.Chunks {
			if ch.Off < 4 || ch.Size < 0 || ch.Off+ch.Size > dataEnd {
				return fmt.Errorf("%w: row group %d: the footer puts column %d at %d+%d, outside the file's data (4 to %d)", errNotParquet, g, pq.cols[k], ch.Off, ch.Size, dataEnd)
			}
		}
		if img := grp.Chunks[0]; grp.Rows > img.Size {
			return &cutAt{fmt.Errorf("%w: row group %d: the footer says %d rows, over the %d bytes of its image column", errNotParquet, g, grp.Rows, img.Size)}
		}
		if grp.Rows > 0 {
			pq.groups = append(pq.groups, rowGroup{first: rows, rows: grp.Rows, num: int32(g), chunk: grp.Chunks[0]})
			if len(grp.Chunks) > 1 {
				pq.labels = append(pq.labels, grp.Chunks[1])
			}
		}
		rows += grp.Rows
		return nil
	})
	var cut *cutAt
	switch {
	case errors.As(err, &cut):
		pq.cut = cut.err // the groups before stand
		return nil
	case errors.Is(err, pqfile.ErrFooter):
		return fmt.Errorf("%w: %v", errNotParquet, err)
	case err != nil:
		return err
	}
	if rows != pq.rows {
		return fmt.Errorf("%w: the footer says %d rows, its row groups %d", errNotParquet, pq.rows, rows)
	}
	pq.groups = slices.Clip(pq.groups)
	return nil
}

// cutAt: a row group whose claims are the footer's lie: the file is
// served up to it, the rest left out (said once, not a row at a time).
type cutAt struct{ err error }

func (c *cutAt) Error() string { return c.err.Error() }

// maxGroupRows bounds a row group's rows: a row index is 32 bits here.
const maxGroupRows = 1 << 30

// group is the row group (its place in groups) holding the file's row
// r, and r's row in it.
func (pq *parquetShard) group(r int64) (int, int64) {
	g, _ := slices.BinarySearchFunc(pq.groups, r, func(rg rowGroup, r int64) int {
		switch {
		case rg.first+rg.rows <= r:
			return -1
		case rg.first > r:
			return 1
		}
		return 0
	})
	return g, r - pq.groups[min(g, len(pq.groups)-1)].first
}

// chunk is row group g's image chunk: where it is, what reading and
// decoding it take.
func (pq *parquetShard) chunk(g int) (off, read, held int64) {
	ch := pq.groups[g].chunk
	return ch.Off, ch.Size, max(ch.Uncompressed, ch.Size)
}

// values decodes row group g's chunk of col (raw: its bytes), calling
// each with every row's value in order: a page that does not decompress
// or decode, or a count of values other than the group's rows, is the
// group's error. Its pages' headers are read first: pages that would
// take more than limit bytes decompressed are the group's error
// (errTooBig) before a byte is decompressed (a page of zeros that zstd
// turns into gigabytes, whatever the footer says).
func (pq *parquetShard) values(g int, col pqfile.Column, raw []byte, limit int64, each func(row int, v pqfile.Value) error) error {
	row := 0
	err := pqfile.Decode(raw, col, pq.groups[g].rows, limit, func(v pqfile.Value) error {
		row++
		return each(row-1, v)
	})
	if err != nil {
		return fmt.Errorf("row group %d: %w", pq.groups[g].num, err)
	}
	return nil
}

// errTooBig: a row group whose pages would take more memory than it may.
var errTooBig = pqfile.ErrTooBig

// imageCol is row group g's image column, with its chunk's codec.
func (pq *parquetShard) imageCol(g int) pqfile.Column {
	c := pq.image
	c.Codec = pq.groups[g].chunk.Codec
	return c
}

// openFooters is each Parquet file's footer parsed: as indexing parsed
// it, or from the index file; nil for a file left out whole.
func openFooters(paths []string, indexes []shardIndex, cols Columns) ([]*parquetShard, error) {
	pqs := make([]*parquetShard, len(paths))
	for i, ix := range indexes {
		if ix.err != nil || ix.footer == nil {
			continue
		}
		if ix.pq != nil { // parsed by indexing just now
			pqs[i] = ix.pq
			continue
		}
		pq, err := openParquet(ix.footer, ix.size, cols)
		if err != nil {
			return nil, fmt.Errorf("file %s: its footer as indexed: %w", strconv.Quote(paths[i]), err)
		}
		pq.footer, pq.labels = nil, nil // walked: the index file's bytes are not kept
		pqs[i] = pq
	}
	return pqs, nil
}

// firstOf is a list's first entry, for a message, and how many follow.
func firstOf(list []string) string {
	switch len(list) {
	case 0:
		return "none"
	case 1:
		return list[0]
	}
	return fmt.Sprintf("%s, and %d more", list[0], len(list)-1)
}
