package source

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
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
// the image column and each row group's chunk of it.
type parquetShard struct {
	file   *parquet.File
	image  int     // the image column's leaf index
	groups []int64 // row groups' first rows, and the rows in all after the last
	footer []byte  // the file's footer, its length and magic: what the index file keeps
	label  int     // the label column's leaf index; -1: none (every label 0)
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

// openParquet parses a file's footer (tail holds the file's last bytes,
// footer included) and finds the columns cols names.
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
	f, err := parquet.OpenFile(&tailReader{tail: footer, size: size}, size,
		parquet.SkipMagicBytes(true), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true), parquet.OptimisticRead(false))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotParquet, err)
	}
	pq := &parquetShard{file: f, footer: footer}
	if err := pq.find(cols); err != nil {
		return nil, &unusable{rows: f.NumRows(), err: err}
	}
	if err := pq.checkGroups(size - n - 8); err != nil {
		return nil, err
	}
	return pq, nil
}

// errShortTail: the footer is longer than the tail read; read need bytes.
type errShortTail struct{ need int64 }

func (e errShortTail) Error() string { return fmt.Sprintf("footer needs the last %d bytes", e.need) }

// tailReader serves a file's tail, where its footer is: parquet.OpenFile
// reads nothing else (no magic at the start, no page index).
type tailReader struct {
	tail []byte
	size int64
}

func (t *tailReader) ReadAt(p []byte, off int64) (int, error) {
	start := t.size - int64(len(t.tail))
	if off < start || off+int64(len(p)) > t.size {
		return 0, fmt.Errorf("read of %d bytes at %d outside the footer", len(p), off)
	}
	return copy(p, t.tail[off-start:]), nil
}

// find sets the image column, and checks the label column, as cols name
// them: flat (no repeated field on the way), of the right type.
func (pq *parquetShard) find(cols Columns) error {
	schema := pq.file.Schema()
	image, ok := leaf(schema, cols.image(), "bytes")
	if !ok {
		return fmt.Errorf("%w: no image column %q (its columns: %s; --columns image=NAME names another)", errNotParquet, cols.image(), columnNames(schema))
	}
	if err := flat(image, parquet.ByteArray, "image"); err != nil {
		return err
	}
	pq.image = image.ColumnIndex
	pq.label = -1
	if cols.NoLabel {
		return nil
	}
	label, ok := leaf(schema, cols.label(), "")
	if !ok {
		if under := columnsUnder(schema, cols.label()); under != "" {
			return fmt.Errorf("%w: the label column %s is nested (%s); one integer a row is wanted", errNotParquet, cols.label(), under)
		}
		if cols.Label == "" { // the Hub's name, absent: a dataset without labels
			return nil
		}
		return fmt.Errorf("%w: no label column %q (its columns: %s)", errNotParquet, cols.label(), columnNames(schema))
	}
	if err := flat(label, parquet.Int64, "label"); err != nil {
		if err2 := flat(label, parquet.Int32, "label"); err2 != nil {
			return err
		}
	}
	pq.label = label.ColumnIndex
	return nil
}

// leaf finds the leaf column name (dotted: a nested field) or, where
// name is a group, its field inner (the Hub's image struct's bytes).
func leaf(schema *parquet.Schema, name, inner string) (parquet.LeafColumn, bool) {
	path := strings.Split(name, ".")
	if l, ok := schema.Lookup(path...); ok && l.Node.Leaf() {
		return l, true
	}
	if inner != "" {
		if l, ok := schema.Lookup(append(path, inner)...); ok && l.Node.Leaf() {
			return l, true
		}
	}
	return parquet.LeafColumn{}, false
}

// flat checks that l is of kind and holds one value a row: a repeated
// field (a list) where one value is wanted is refused.
func flat(l parquet.LeafColumn, kind parquet.Kind, what string) error {
	if l.MaxRepetitionLevel > 0 {
		return fmt.Errorf("%w: the %s column %s is repeated (a list); one value a row is wanted", errNotParquet, what, strings.Join(l.Path, "."))
	}
	if l.Node.Type().Kind() != kind {
		return fmt.Errorf("%w: the %s column %s is %s, not %s", errNotParquet, what, strings.Join(l.Path, "."), l.Node.Type(), kind)
	}
	return nil
}

// columnsUnder names the leaf columns inside group name, "" if none.
func columnsUnder(schema *parquet.Schema, name string) string {
	var under []string
	for _, p := range schema.Columns() {
		if strings.HasPrefix(strings.Join(p, ".")+".", name+".") {
			under = append(under, strings.Join(p, "."))
		}
	}
	return strings.Join(under, ", ")
}

func columnNames(schema *parquet.Schema) string {
	var names []string
	for _, p := range schema.Columns() {
		names = append(names, strings.Join(p, "."))
	}
	return strings.Join(names, ", ")
}

// checkGroups checks what the footer says of the row groups against the
// file: every column chunk within the data (before the footer, at dataEnd),
// row counts that add up.
func (pq *parquetShard) checkGroups(dataEnd int64) error {
	var rows int64
	groups := pq.file.Metadata().RowGroups
	pq.groups = make([]int64, 0, len(groups)+1)
	for g, rg := range groups {
		if rg.NumRows < 0 || rg.NumRows > maxGroupRows {
			return fmt.Errorf("%w: row group %d: the footer says %d rows", errNotParquet, g, rg.NumRows)
		}
		for c := range rg.Columns {
			off, n := chunkRange(&rg.Columns[c])
			if off < 4 || n < 0 || off+n > dataEnd {
				return fmt.Errorf("%w: row group %d: the footer puts column %d at %d+%d, outside the file's data (4 to %d)", errNotParquet, g, c, off, n, dataEnd)
			}
		}
		pq.groups = append(pq.groups, rows)
		rows += rg.NumRows
	}
	if rows != pq.file.NumRows() {
		return fmt.Errorf("%w: the footer says %d rows, its row groups %d", errNotParquet, pq.file.NumRows(), rows)
	}
	pq.groups = append(pq.groups, rows)
	return nil
}

// maxGroupRows bounds a row group's rows: a row index is 32 bits here.
const maxGroupRows = 1 << 30

// chunkRange is where a column chunk's pages are in its file.
func chunkRange(c *format.ColumnChunk) (off, n int64) {
	off = c.MetaData.DataPageOffset
	if d := c.MetaData.DictionaryPageOffset; d != 0 && d < off {
		off = d
	}
	return off, c.MetaData.TotalCompressedSize
}

// group is the row group holding the file's row r, and r's row in it.
func (pq *parquetShard) group(r int64) (int, int64) {
	lo, hi := 0, len(pq.groups)-2
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if pq.groups[mid] <= r {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, r - pq.groups[lo]
}

// chunk is row group g's column c: where it is, what reading and
// decoding it take.
func (pq *parquetShard) chunk(g, c int) (off, read, held int64) {
	cc := &pq.file.Metadata().RowGroups[g].Columns[c]
	off, read = chunkRange(cc)
	return off, read, max(cc.MetaData.TotalUncompressedSize, read)
}

// values decodes row group g's column c from its chunk's bytes (raw, read
// at off), calling each with every row's value in order: a page that
// does not decompress or decode, or a count of values other than the
// group's rows, is the group's error. Its pages' headers are read first:
// pages that would take more than limit bytes decompressed are the
// group's error before a byte is decompressed (a page of zeros that
// zstd turns into gigabytes, whatever the footer says).
func (pq *parquetShard) values(g, c int, raw []byte, off, limit int64, each func(row int, v parquet.Value) error) error {
	if need, _, err := pagesNeed(raw, pq.codec(g, c)); err != nil {
		return fmt.Errorf("row group %d: %w", g, err)
	} else if need > limit {
		return fmt.Errorf("row group %d: its pages take %d bytes decompressed, over the %d it may (%w)", g, need, limit, errTooBig)
	}
	rg := pq.file.RowGroups()[g]
	cc, ok := rg.ColumnChunks()[c].(*parquet.FileColumnChunk)
	if !ok {
		return fmt.Errorf("row group %d: column %d is not a file's", g, c)
	}
	pages := cc.PagesFrom(&chunkReader{off: off, data: raw})
	defer pages.Close()
	buf := make([]parquet.Value, 64)
	row := 0
	for {
		page, err := pages.ReadPage()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("row group %d: %w", g, err)
		}
		err = readPage(page, buf, func(v parquet.Value) error {
			if int64(row) >= rg.NumRows() {
				return fmt.Errorf("more values than the %d rows the footer says", rg.NumRows())
			}
			row++
			return each(row-1, v)
		})
		parquet.Release(page)
		if err != nil {
			return fmt.Errorf("row group %d: %w", g, err)
		}
	}
	if int64(row) != rg.NumRows() {
		return fmt.Errorf("row group %d: %d values of the %d rows the footer says", g, row, rg.NumRows())
	}
	return nil
}

// errTooBig: a row group whose pages would take more memory than it may.
var errTooBig = errors.New("too big to decode")

// codec is row group g's column c's compression.
func (pq *parquetShard) codec(g, c int) format.CompressionCodec {
	return pq.file.Metadata().RowGroups[g].Columns[c].MetaData.Codec
}

// pagesNeed walks a column chunk's page headers (raw: the chunk's bytes,
// pages back to back, compressed with codec) and says what decompressing
// its pages takes: the sum of their uncompressed sizes; and how many
// values its data pages say they hold (a flat column's rows). Every page must
// lie within raw, and decompress, by its codec's own word where it gives
// one, to no more than its header says (a decoder goes by the data, not
// the header: a page of zeros that says 1 KB and holds 4 GiB); no page is
// decompressed.
func pagesNeed(raw []byte, codec format.CompressionCodec) (need, values int64, err error) {
	for at := 0; at < len(raw); {
		r := new(thrift.CompactProtocol).NewReaderFromBytes(raw[at:])
		var h format.PageHeader
		if err := thrift.NewDecoder(r).Decode(&h); err != nil {
			return 0, 0, fmt.Errorf("the page header at byte %d of its chunk: %w", at, err)
		}
		n := r.BytesRead()
		if h.CompressedPageSize < 0 || h.UncompressedPageSize < 0 || int64(h.CompressedPageSize) > int64(len(raw)-at-n) {
			return 0, 0, fmt.Errorf("the page at byte %d of its chunk: %d bytes compressed, %d decompressed, in the %d bytes left of the chunk",
				at, h.CompressedPageSize, h.UncompressedPageSize, len(raw)-at-n)
		}
		data := raw[at+n : at+n+int(h.CompressedPageSize)]
		if v2 := h.DataPageHeaderV2; v2.Valid {
			levels := int64(v2.V.RepetitionLevelsByteLength) + int64(v2.V.DefinitionLevelsByteLength)
			if v2.V.IsCompressed.Valid && !v2.V.IsCompressed.V || levels < 0 || levels > int64(len(data)) {
				data = nil // nothing compressed, or levels the decoder refuses
			} else {
				data = data[levels:]
			}
		}
		if says, ok := declared(codec, data); ok && says > int64(h.UncompressedPageSize) {
			return 0, 0, fmt.Errorf("the page at byte %d of its chunk decompresses to %d bytes by its own word, over the %d its header says", at, says, h.UncompressedPageSize)
		}
		need += int64(h.UncompressedPageSize)
		switch {
		case h.DataPageHeader.Valid:
			values += int64(h.DataPageHeader.V.NumValues)
		case h.DataPageHeaderV2.Valid:
			values += int64(h.DataPageHeaderV2.V.NumValues)
		}
		at += n + int(h.CompressedPageSize)
	}
	return need, values, nil
}

// declared is the least a compressed page's bytes decompress to by its
// codec's own word, where the codec says it at the start: SNAPPY's
// length, the first ZSTD frame's content size (other frames only add to
// it); ok is false where it says nothing (other codecs, a frame without
// its size, bytes too short to say: the decoder refuses those).
func declared(codec format.CompressionCodec, data []byte) (int64, bool) {
	switch codec {
	case format.Snappy:
		n, k := binary.Uvarint(data)
		if k <= 0 {
			return 0, false
		}
		return int64(min(n, 1<<62)), true
	case format.Zstd:
		return zstdContentSize(data)
	}
	return 0, false
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

// readPage calls each with the page's values in order.
func readPage(page parquet.Page, buf []parquet.Value, each func(v parquet.Value) error) error {
	r := page.Values()
	for {
		n, err := r.ReadValues(buf)
		for _, v := range buf[:n] {
			if err := each(v); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
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
