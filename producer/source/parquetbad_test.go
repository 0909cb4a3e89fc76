package source_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// footerOf is a Parquet file's bytes split at its footer, and the footer
// parsed.
func footerOf(t *testing.T, data []byte) (body []byte, meta format.FileMetaData) {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	body = data[:len(data)-8-n]
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[len(body):len(data)-8], &meta); err != nil {
		t.Fatal(err)
	}
	return body, meta
}

// withFooter is body with meta as its footer.
func withFooter(t *testing.T, body []byte, meta *format.FileMetaData) []byte {
	t.Helper()
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), meta)
	if err != nil {
		t.Fatal(err)
	}
	out := append(append([]byte{}, body...), footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, "PAR1"...)
}

// hubParquet is a Parquet file in the Hub's layout of 10 images of 2
// classes, in row groups of 5: its path and bytes, split at its footer,
// and the footer parsed; dir is the folder of the images.
func hubParquet(t *testing.T) (dir, path string, data, body []byte, meta format.FileMetaData) {
	t.Helper()
	dir = producertest.Folder(t, 10, 2)
	path = strings.Replace(producertest.Parquet(t, dir, producertest.ParquetOptions{Files: 1, RowsPerGroup: 5}), "{00000..00000}", "00000", 1)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body, meta = footerOf(t, data)
	return dir, path, data, body, meta
}

// imageChunk is where row group g's image chunk is in a file.
func imageChunk(meta *format.FileMetaData, g int) (off, n int64) {
	c := meta.RowGroups[g].Columns[0].MetaData // image.bytes is the first column
	off = c.DataPageOffset
	if d := c.DictionaryPageOffset; d != 0 && d < off {
		off = d
	}
	return off, c.TotalCompressedSize
}

// TestParquetBadInputLosesOnlyItsRows: every way a Parquet file's own
// bytes can be wrong leaves out only what they spoil, each named (the
// file, and the row group or row) and counted; the good rows are all
// served byte for byte; nothing panics.
func TestParquetBadInputLosesOnlyItsRows(t *testing.T) {
	dir, good, data, body, meta := hubParquet(t)
	out := t.TempDir()
	put := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("a-good.parquet", data)
	put("b-not-parquet.parquet", []byte("\xff\xd8\xff\xe0 a JPEG, not a table"))
	put("c-truncated.parquet", data[:len(data)/2])
	lying := meta // a footer that puts row group 1 past the file's data
	lying.RowGroups = append([]format.RowGroup{}, meta.RowGroups...)
	lying.RowGroups[1].Columns = append([]format.ColumnChunk{}, meta.RowGroups[1].Columns...)
	lying.RowGroups[1].Columns[0].MetaData.DataPageOffset += int64(len(body))
	put("d-lying-footer.parquet", withFooter(t, body, &lying))
	spoilt := append([]byte{}, data...) // row group 1's image pages do not decompress
	off, n := imageChunk(&meta, 1)
	for k := off + n/2; k < off+n-8; k++ {
		spoilt[k] ^= 0x5a
	}
	put("e-spoilt-group.parquet", spoilt)
	unknown := meta // an unknown compression for the images
	unknown.RowGroups = append([]format.RowGroup{}, meta.RowGroups...)
	for g := range unknown.RowGroups {
		unknown.RowGroups[g].Columns = append([]format.ColumnChunk{}, meta.RowGroups[g].Columns...)
		unknown.RowGroups[g].Columns[0].MetaData.Codec = 77
	}
	put("f-unknown-codec.parquet", withFooter(t, body, &unknown))
	// A null image, and a null label.
	nulls := producertest.Parquet(t, dir, producertest.ParquetOptions{Files: 1, RowsPerGroup: 5, Edit: func(i int, row *producertest.HubRow) {
		switch i {
		case 2:
			row.Image = nil
		case 7:
			row.Label = nil
		}
	}})
	if data, err := os.ReadFile(strings.Replace(nulls, "{00000..00000}", "00000", 1)); err != nil {
		t.Fatal(err)
	} else {
		put("g-nulls.parquet", data)
	}
	// A repeated label column (a list a row) where one value is wanted.
	type listRow struct {
		Image []byte  `parquet:"image"`
		Label []int64 `parquet:"label,list"`
	}
	producertest.WriteParquet(t, filepath.Join(out, "h-list-label.parquet"), []listRow{{[]byte("x"), []int64{1, 2}}, {[]byte("y"), nil}, {[]byte("z"), []int64{0}}}, 2, "snappy", "")

	src, err := source.Open(context.Background(), filepath.Join(out, "*.parquet"), source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sk := src.(source.Skipper)
	notes := strings.Join(sk.Skipped(), "\n")
	for _, want := range []string{
		"b-not-parquet.parquet: the rest of the file",
		"c-truncated.parquet: the rest of the file",
		"d-lying-footer.parquet: the rest of the file", "row group 1",
		"h-list-label.parquet: its 3 rows:", "nested",
		"g-nulls.parquet: row 7: its label is null or negative",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("left out, want %q named:\n%s", want, notes)
		}
	}
	// 3 whole files counted as a typical file (10 rows), 3 rows of the
	// list file, the null label.
	if got, want := sk.LeftOut(), 3*10+3+1; got != want {
		t.Errorf("%d samples left out at open, want %d:\n%s", got, want, notes)
	}
	// Served: a-good's 10, e's 10 (5 fail at read), f's 10 (all fail at
	// read), g's 9 (the null image fails at read).
	if src.Len() != 39 {
		t.Fatalf("%d samples served, want 39", src.Len())
	}
	order := make([]int, src.Len())
	for i := range order {
		order[i] = i
	}
	sh := src.(source.Sharded)
	sh.Schedule(order, nil)
	defer sh.Schedule(nil, nil)
	whole, _ := source.Open(context.Background(), good, source.Options{})
	var scratch, ref []byte
	failed := map[string]int{}
	for _, i := range order {
		b, err := src.Encoded(context.Background(), i, &scratch)
		name := src.Name(i)
		file := filepath.Base(name[:strings.LastIndexByte(name, ':')])
		if err != nil {
			if !strings.Contains(err.Error(), file) {
				t.Errorf("sample %s: %v: the file is not named", name, err)
			}
			failed[file]++
			switch file {
			case "e-spoilt-group.parquet", "f-unknown-codec.parquet":
				if !strings.Contains(err.Error(), "row group") {
					t.Errorf("sample %s: %v: the row group is not named", name, err)
				}
			case "g-nulls.parquet":
				if !strings.Contains(err.Error(), "image is null") {
					t.Errorf("sample %s: %v, want its null image named", name, err)
				}
			}
			if errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			continue
		}
		row := 0
		fmt.Sscanf(name[strings.LastIndexByte(name, ':')+1:], "row %d", &row)
		if ref, err = whole.Encoded(context.Background(), row, &ref); err != nil {
			t.Fatal(err)
		}
		if string(b) != string(ref) {
			t.Errorf("sample %s: not row %d's image", name, row)
		}
	}
	want := map[string]int{"e-spoilt-group.parquet": 5, "f-unknown-codec.parquet": 10, "g-nulls.parquet": 1}
	if fmt.Sprint(failed) != fmt.Sprint(want) {
		t.Errorf("samples that failed at read, by file: %v, want %v", failed, want)
	}
}

// TestParquetSizeClaimsAreNotAllocated: a footer that claims a terabyte
// for a row group's image chunk, read a sample at a time (--shard-memory
// 0, where each sample's row group is decoded for it), costs what the
// chunk's pages take, not the claim: every row served, byte for byte the
// honest file's. (Before: the daemon died, out of memory in
// parquetAlone, allocating the footer's word.)
func TestParquetSizeClaimsAreNotAllocated(t *testing.T) {
	_, path, _, body, meta := hubParquet(t)
	claim := meta
	claim.RowGroups = append([]format.RowGroup{}, meta.RowGroups...)
	claim.RowGroups[1].Columns = append([]format.ColumnChunk{}, meta.RowGroups[1].Columns...)
	claim.RowGroups[1].Columns[0].MetaData.TotalUncompressedSize = 1 << 40
	lying := filepath.Join(t.TempDir(), "claims.parquet")
	if err := os.WriteFile(lying, withFooter(t, body, &claim), 0o644); err != nil {
		t.Fatal(err)
	}
	alone := func(spec string) source.Source {
		t.Helper()
		src, err := source.Open(context.Background(), spec, source.Options{Shards: &source.ShardSpace{Memory: 0, Batch: 4}})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	cfg := func(src source.Source) producer.Config {
		c := producertest.Config(src, 4, 1, 1)
		c.Transform = pipeline.Eval
		return c
	}
	honest, claims := alone(path), alone(lying)
	producertest.EqualBatches(t, producertest.Produce(t, cfg(honest)), producertest.Produce(t, cfg(claims)), "the honest file and the one claiming a terabyte")
}

// TestAClaimedRowCountIsCheckedFirst: a footer that claims ten million
// rows for a row group of five is checked against the bytes of the
// group's image chunk (a row takes one at least) before a label slot or
// a skip record is made a row: the rest of the file is left out, said
// once, and the row group before it is served. (Before: a label slot and a skip record per claimed row,
// 3.41 GiB for the held-out suite's file.)
func TestAClaimedRowCountIsCheckedFirst(t *testing.T) {
	_, _, _, body, meta := hubParquet(t)
	claim := meta
	claim.RowGroups = append([]format.RowGroup{}, meta.RowGroups...)
	claim.RowGroups[1].NumRows = 10_000_000
	claim.NumRows = 10_000_005
	file := filepath.Join(t.TempDir(), "claims.parquet")
	if err := os.WriteFile(file, withFooter(t, body, &claim), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := source.Open(context.Background(), file, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	said := src.(source.Skipper).Skipped()
	if src.Len() != 5 || len(said) != 1 || !strings.Contains(said[0], "row group 1: the footer says 10000000 rows, over the ") || !strings.HasSuffix(said[0], " bytes of its image column") {
		t.Fatalf("%d samples; %d said, the first %q", src.Len(), len(said), firstOf(said))
	}
}

// firstOf is the first of said, or "".
func firstOf(said []string) string {
	if len(said) == 0 {
		return ""
	}
	return said[0]
}

// BenchmarkWriteHostileParquet writes the hostile Parquet suite into
// $TSOCK_HOSTILE_OUT for scripts/bench_parquet_hostile.sh, which runs a
// daemon over it and measures its peak memory: a good file of 10 rows,
// and beside it a footer claiming a terabyte for a chunk, a footer of
// 500,000 empty row groups, a zstd page of 1 GiB of zeros whose header
// says 1000 bytes and one whose header says 1 GiB, and a page whose
// levels are a run of 2^30 (each in row group 1, the rest of the file
// the good one's).
func BenchmarkWriteHostileParquet(b *testing.B) {
	out := os.Getenv("TSOCK_HOSTILE_OUT")
	if out == "" {
		b.Skip("TSOCK_HOSTILE_OUT: where to write the suite (scripts/bench_parquet_hostile.sh sets it)")
	}
	for b.Loop() {
		writeHostile(b, out)
	}
}

// writeHostile writes the hostile suite into out.
func writeHostile(b testing.TB, out string) {
	dir := producertest.Folder(b, 10, 2)
	path := strings.Replace(producertest.Parquet(b, dir, producertest.ParquetOptions{Files: 1, RowsPerGroup: 5}), "{00000..00000}", "00000", 1)
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	body := data[:len(data)-8-n]
	var meta format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[len(body):len(data)-8], &meta); err != nil {
		b.Fatal(err)
	}
	write := func(name string, file []byte) {
		if err := os.WriteFile(filepath.Join(out, name), file, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	footer := func(body []byte, m *format.FileMetaData) []byte {
		f, err := thrift.Marshal(new(thrift.CompactProtocol), m)
		if err != nil {
			b.Fatal(err)
		}
		o := append(append([]byte{}, body...), f...)
		return append(binary.LittleEndian.AppendUint32(o, uint32(len(f))), "PAR1"...)
	}
	edit := func() format.FileMetaData {
		m := meta
		m.RowGroups = append([]format.RowGroup{}, meta.RowGroups...)
		m.RowGroups[1].Columns = append([]format.ColumnChunk{}, meta.RowGroups[1].Columns...)
		return m
	}
	write("a-good.parquet", data)
	claim := edit()
	claim.RowGroups[1].Columns[0].MetaData.TotalUncompressedSize = 1 << 40
	write("b-claims-a-terabyte.parquet", footer(body, &claim))
	empty := meta
	none := format.RowGroup{}
	for _, c := range meta.RowGroups[0].Columns {
		md := c.MetaData
		none.Columns = append(none.Columns, format.ColumnChunk{MetaData: format.ColumnMetaData{Type: md.Type, Codec: md.Codec,
			DataPageOffset: md.DataPageOffset, TotalCompressedSize: md.TotalCompressedSize, TotalUncompressedSize: md.TotalUncompressedSize}})
	}
	empty.RowGroups = append([]format.RowGroup{}, meta.RowGroups...)
	for range 500_000 {
		empty.RowGroups = append(empty.RowGroups, none)
	}
	write("c-empty-groups.parquet", footer(body, &empty))
	// A chunk of one page, appended after the data, as row group 1's
	// image chunk.
	page := func(codec format.CompressionCodec, claims int32, payload []byte) []byte {
		h := format.PageHeader{Type: format.DataPage, UncompressedPageSize: claims, CompressedPageSize: int32(len(payload))}
		h.DataPageHeader.Valid = true
		h.DataPageHeader.V = format.DataPageHeader{NumValues: 5, Encoding: format.Plain, DefinitionLevelEncoding: format.RLE}
		hb, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
		if err != nil {
			b.Fatal(err)
		}
		chunk := append(hb, payload...)
		m := edit()
		md := &m.RowGroups[1].Columns[0].MetaData
		md.Codec, md.DataPageOffset, md.DictionaryPageOffset = codec, int64(len(body)), 0
		md.TotalCompressedSize, md.TotalUncompressedSize = int64(len(chunk)), int64(claims)
		return footer(append(append([]byte{}, body...), chunk...), &m)
	}
	var z bytes.Buffer
	zw, err := zstd.NewWriter(&z)
	if err != nil {
		b.Fatal(err)
	}
	zeros := make([]byte, 1<<20)
	for range 1 << 10 {
		zw.Write(zeros)
	}
	zw.Close()
	write("d-zstd-gigabyte-says-1000.parquet", page(format.Zstd, 1000, z.Bytes()))
	write("e-zstd-gigabyte-says-so.parquet", page(format.Zstd, 1<<30, z.Bytes()))
	run := binary.AppendUvarint(nil, 1<<30<<1)
	levels := append(binary.LittleEndian.AppendUint32(nil, uint32(len(run)+1)), append(run, 2)...)
	for range 5 {
		levels = append(binary.LittleEndian.AppendUint32(levels, 1), 'x')
	}
	write("f-run-of-2^30-levels.parquet", page(format.Uncompressed, int32(len(levels)), levels))
}
