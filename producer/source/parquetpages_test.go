package source

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// TestPagesAreBoundedBeforeTheyDecompress: a row group's image chunk is
// decoded only into the room its pages' headers say they take; given
// less (a footer that understates the chunk, a row group over the memory
// it may take), it is refused before a page is decompressed, with
// errTooBig; what its pages take is never more than the footer's honest
// size.
func TestPagesAreBoundedBeforeTheyDecompress(t *testing.T) {
	type row struct {
		Image []byte `parquet:"image"`
		Label int64  `parquet:"label"`
	}
	var file bytes.Buffer
	w := parquet.NewGenericWriter[row](&file, parquet.Compression(&parquet.Zstd))
	rows := []row{{bytes.Repeat([]byte{0}, 100000), 0}, {[]byte("an image"), 1}}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := file.Bytes()
	pq, err := openParquet(data, int64(len(data)), Columns{})
	if err != nil {
		t.Fatal(err)
	}
	off, read, held := pq.chunk(0, pq.image)
	raw := data[off : off+read]
	need, values, err := pagesNeed(raw, pq.codec(0, pq.image))
	if err != nil || need < 100000 || need > held || values != 2 {
		t.Fatalf("the pages take %d bytes and hold %d values (%v); the footer says %d bytes, the images 100008 in 2 rows", need, values, err, held)
	}
	if _, err := pq.imageRows(0, raw, off, make([]byte, need)); err != nil {
		t.Fatalf("decoding into the room the pages say: %v", err)
	}
	if _, err := pq.imageRows(0, raw, off, make([]byte, need-1)); !errors.Is(err, errTooBig) {
		t.Fatalf("decoding into less room than the pages say: %v, want errTooBig", err)
	}
	if _, _, err := pagesNeed(raw[:len(raw)-1], pq.codec(0, pq.image)); err == nil {
		t.Fatal("a chunk cut short: its last page past its end, not said")
	}
}

// TestAPageIsBelievedOnlyAsFarAsItsCodecSays: a page whose header says
// it decompresses to 100 bytes, holding a megabyte of zeros by its
// codec's own word (SNAPPY's length, a ZSTD frame's content size), is
// refused before it is decompressed; the same page with an honest header
// passes; a codec that says nothing (GZIP) is left to the header.
func TestAPageIsBelievedOnlyAsFarAsItsCodecSays(t *testing.T) {
	zeros := make([]byte, 1<<20)
	for _, codec := range []format.CompressionCodec{format.Snappy, format.Zstd, format.Gzip} {
		comp, err := parquet.LookupCompressionCodec(codec).Encode(nil, zeros)
		if err != nil {
			t.Fatal(err)
		}
		page := func(claims int32) []byte {
			h := format.PageHeader{Type: format.DataPage, UncompressedPageSize: claims, CompressedPageSize: int32(len(comp))}
			h.DataPageHeader.Valid = true
			h.DataPageHeader.V = format.DataPageHeader{NumValues: 1}
			b, err := thrift.Marshal(new(thrift.CompactProtocol), &h)
			if err != nil {
				t.Fatal(err)
			}
			return append(b, comp...)
		}
		need, _, err := pagesNeed(page(1<<20), codec)
		if err != nil || need != 1<<20 {
			t.Errorf("%v: an honest page: %d, %v", codec, need, err)
		}
		_, _, err = pagesNeed(page(100), codec)
		if says := codec != format.Gzip; (err != nil) != says || (says && !strings.Contains(err.Error(), "decompresses to 1048576 bytes by its own word, over the 100 its header says")) {
			t.Errorf("%v: a page whose header says 100 bytes: %v", codec, err)
		}
	}
}
