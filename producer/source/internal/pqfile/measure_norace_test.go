//go:build !race

// Tests whose verdict is a statistic or a memory figure: the race
// detector changes what allocations cost and slows them several times,
// and watches nothing they run that the race-built tests do not run too.
// scripts/test.sh runs them in a plain build beside go test -race (the
// files with this build line are its list).

package pqfile

import (
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// TestAPageHoldsNoMoreThanItsHeaderSays: a page whose header says 1000
// bytes, holding 64 MiB of zeros in any codec (those that state their
// size and those that do not), is refused having decoded no more than
// the header's bytes: what decoding it allocates is a few MiB at most
// (the codecs' own tables and windows: brotli's 16 MiB at most; a zstd frame asking a window past
// the page's size, or 8 MiB, is refused at its header), never the 64 MiB
// it holds. (parquet-go
// allocated what the data held: 4.17 GiB and more for a zstd page.)
func TestAPageHoldsNoMoreThanItsHeaderSays(t *testing.T) {
	col := Column{Type: ByteArray}
	for name, b := range bombs(t) {
		raw := pageOf(t, 1000, 1, b.data)
		var err error
		col.Codec = b.codec
		Decode(raw, col, 1, 1<<30, func(Value) error { return nil }) // the codec's pool, warmed
		n := allocated(func() { err = Decode(raw, col, 1, 1<<30, func(Value) error { return nil }) })
		if err == nil || !strings.Contains(err.Error(), "1000 bytes the header says") && !strings.Contains(err.Error(), "its own word") && !strings.Contains(err.Error(), "asks a zstd window of 67108864 bytes, for 1000") {
			t.Errorf("%s: a page of 64 MiB saying 1000 bytes: %v", name, err)
		}
		if n > 24<<20 { // brotli's window is 16 MiB at most, zstd's checked at its header
			t.Errorf("%s: decoding it allocated %d MiB", name, n>>20)
		}
	}
}

// TestAFooterCostsWhatItKeeps: a footer of 200,000 empty row groups (17
// MB) is walked allocating a small part of its size, and what it keeps
// of them is nothing. (parquet-go: 1.62 GiB at open for 500,000, 934 MiB
// kept.)
func TestAFooterCostsWhatItKeeps(t *testing.T) {
	meta := format.FileMetaData{Version: 1, NumRows: 0, Schema: []format.SchemaElement{
		{Name: "hub", NumChildren: thrift.New[int32](2)}, {Name: "image", Type: thrift.New(format.ByteArray), RepetitionType: thrift.New(format.Optional)},
		{Name: "label", Type: thrift.New(format.Int64), RepetitionType: thrift.New(format.Optional)}}}
	empty := format.RowGroup{Columns: []format.ColumnChunk{
		{MetaData: format.ColumnMetaData{Type: format.ByteArray, PathInSchema: []string{"image"}, Codec: format.Snappy, DataPageOffset: 4, Encoding: []format.Encoding{format.Plain}}},
		{MetaData: format.ColumnMetaData{Type: format.Int64, PathInSchema: []string{"label"}, Codec: format.Snappy, DataPageOffset: 4, Encoding: []format.Encoding{format.Plain}}}}}
	for range 200_000 {
		meta.RowGroups = append(meta.RowGroups, empty)
	}
	b, err := thrift.Marshal(new(thrift.CompactProtocol), &meta)
	if err != nil {
		t.Fatal(err)
	}
	meta.RowGroups = nil
	var groups, kept int
	n := allocated(func() {
		f, err := ParseFooter(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Groups([]int{0, 1}, func(g int, grp Group) error {
			groups++
			if grp.Rows > 0 {
				kept++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	if groups != 200_000 || kept != 0 || n > uint64(len(b))/4 {
		t.Fatalf("a footer of %d bytes: %d row groups walked, %d with rows; %d bytes allocated", len(b), groups, kept, n)
	}
}
