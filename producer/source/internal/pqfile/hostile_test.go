package pqfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
	"github.com/pierrec/lz4/v4"
)

// allocated is what f allocates, all told.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// pageOf is a data page (v1) of values values whose header says it
// decompresses to claims bytes, holding body as compressed.
func pageOf(t testing.TB, claims, values int32, body []byte) []byte {
	t.Helper()
	h := format.PageHeader{Type: format.DataPage, UncompressedPageSize: claims, CompressedPageSize: int32(len(body))}
	h.DataPageHeader.Valid = true
	h.DataPageHeader.V = format.DataPageHeader{NumValues: values, Encoding: format.Plain, DefinitionLevelEncoding: format.RLE}
	b, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, body...)
}

// bombs are 64 MiB of zeros in every codec, as a page's compressed
// bytes, including the shapes that state no size: zstd streamed (no
// frame content size), GZIP, BROTLI, LZ4_RAW, Hadoop's LZ4.
func bombs(t testing.TB) map[string]struct {
	codec Codec
	data  []byte
} {
	zeros := make([]byte, 64<<20)
	enc := func(c encoder) []byte {
		b, err := c.Encode(nil, zeros)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	stream := func(window int) []byte {
		var b bytes.Buffer
		zw, err := zstd.NewWriter(&b, zstd.WithWindowSize(window))
		if err != nil {
			t.Fatal(err)
		}
		zw.Write(zeros)
		zw.Close()
		if _, ok := zstdContentSize(b.Bytes()); ok {
			t.Fatal("a streamed zstd frame that says its size")
		}
		return b.Bytes()
	}
	block := make([]byte, lz4.CompressBlockBound(len(zeros)))
	n, err := lz4.CompressBlock(zeros, block, nil)
	if err != nil {
		t.Fatal(err)
	}
	hadoop := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(len(zeros))), uint32(n))
	hadoop = append(hadoop, block[:n]...)
	return map[string]struct {
		codec Codec
		data  []byte
	}{
		"snappy":                          {Snappy, enc(&parquet.Snappy)},
		"gzip":                            {Gzip, enc(&parquet.Gzip)},
		"brotli":                          {Brotli, enc(&parquet.Brotli)},
		"zstd":                            {Zstd, enc(&parquet.Zstd)},
		"zstd, streamed":                  {Zstd, stream(1 << 20)},
		"zstd, streamed, a 64 MiB window": {Zstd, stream(64 << 20)},
		"lz4_raw":                         {LZ4Raw, block[:n]},
		"lz4, hadoop's":                   {LZ4, hadoop},
	}
}

type encoder interface {
	Encode(dst, src []byte) ([]byte, error)
}

// TestARunIsNeverExpanded: a page of 10 values whose levels (and, in a
// dictionary page, indexes) are one run of 2^30 is read as 10 values,
// allocating nothing by the run. (parquet-go expanded each run: 3.0 GiB.)
func TestARunIsNeverExpanded(t *testing.T) {
	run := binary.AppendUvarint(nil, 1<<30<<1)                                                     // a run of 2^30 …
	levels := append(binary.LittleEndian.AppendUint32(nil, uint32(len(run)+1)), append(run, 0)...) // … of nulls
	raw := pageOf(t, int32(len(levels)), 10, levels)
	col := Column{Type: ByteArray, MaxDef: 1}
	nulls := 0
	var err error
	n := allocated(func() {
		err = Decode(raw, col, 10, 1<<30, func(v Value) error {
			if v.Null {
				nulls++
			}
			return nil
		})
	})
	if err != nil || nulls != 10 || n > 1<<20 {
		t.Fatalf("levels of a run of 2^30: %d nulls of 10 (%v), %d bytes allocated", nulls, err, n)
	}

	// A dictionary of one image, and a run of 2^30 indexes into it.
	dict := append(binary.LittleEndian.AppendUint32(nil, 3), "jpg"...)
	dh := format.PageHeader{Type: format.DictionaryPage, UncompressedPageSize: int32(len(dict)), CompressedPageSize: int32(len(dict))}
	dh.DictionaryPageHeader.Valid = true
	dh.DictionaryPageHeader.V = format.DictionaryPageHeader{NumValues: 1, Encoding: format.Plain}
	chunk, err := thrift.Marshal(new(thrift.CompactProtocol), &dh)
	if err != nil {
		t.Fatal(err)
	}
	chunk = append(chunk, dict...)
	idx := append([]byte{1}, append(binary.AppendUvarint(nil, 1<<30<<1), 0)...)
	h := format.PageHeader{Type: format.DataPage, UncompressedPageSize: int32(len(idx)), CompressedPageSize: int32(len(idx))}
	h.DataPageHeader.Valid = true
	h.DataPageHeader.V = format.DataPageHeader{NumValues: 10, Encoding: format.RLEDictionary}
	hb, _ := thrift.Marshal(new(thrift.CompactProtocol), &h)
	chunk = append(append(chunk, hb...), idx...)
	images := 0
	n = allocated(func() {
		err = Decode(chunk, Column{Type: ByteArray}, 10, 1<<30, func(v Value) error {
			if string(v.Bytes) == "jpg" {
				images++
			}
			return nil
		})
	})
	if err != nil || images != 10 || n > 1<<20 {
		t.Fatalf("indexes of a run of 2^30: %d images of 10 (%v), %d bytes allocated", images, err, n)
	}
}

// TestClaimsAreCheckedBeforeAllocating: counts a page states (values, a
// dictionary's entries) and sizes past the chunk or the caller's limit
// are refused before a byte is decompressed.
func TestClaimsAreCheckedBeforeAllocating(t *testing.T) {
	col := Column{Type: ByteArray}
	// A header saying 1 GiB decompressed, over the limit.
	if err := Decode(pageOf(t, 1<<30, 1, []byte("x")), col, 1, 1<<20, func(Value) error { return nil }); !errors.Is(err, ErrTooBig) {
		t.Errorf("a page of 1 GiB under a limit of 1 MiB: %v", err)
	}
	// Values other than the row group's rows.
	body := append(binary.LittleEndian.AppendUint32(nil, 1), 'x')
	if err := Decode(pageOf(t, int32(len(body)), 1, body), col, 2_000_000_000, 1<<20, func(Value) error { return nil }); err == nil || !strings.Contains(err.Error(), "hold 1 values, its row group 2000000000 rows") {
		t.Errorf("a page of 1 value for a row group claiming 2e9 rows: %v", err)
	}
	// A dictionary claiming 2^30 entries in 7 bytes.
	dict := append(binary.LittleEndian.AppendUint32(nil, 3), "jpg"...)
	dh := format.PageHeader{Type: format.DictionaryPage, UncompressedPageSize: int32(len(dict)), CompressedPageSize: int32(len(dict))}
	dh.DictionaryPageHeader.Valid = true
	dh.DictionaryPageHeader.V = format.DictionaryPageHeader{NumValues: 1 << 30, Encoding: format.Plain}
	chunk, _ := thrift.Marshal(new(thrift.CompactProtocol), &dh)
	chunk = append(append(chunk, dict...), pageOf(t, int32(len(body)), 1, body)...)
	var err error
	n := allocated(func() { err = Decode(chunk, col, 1, 1<<30, func(Value) error { return nil }) })
	if err == nil || !strings.Contains(err.Error(), "a dictionary of 1073741824 values in 7 bytes") || n > 1<<20 {
		t.Errorf("a dictionary claiming 2^30 entries: %v, %d bytes allocated", err, n)
	}
}
