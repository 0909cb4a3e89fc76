package source

import (
	"bytes"
	"errors"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/tsock/tsock/producer/source/internal/pqfile"
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
	off, read, held := pq.chunk(0)
	raw := data[off : off+read]
	need, values, err := pqfile.Need(raw, pq.groups[0].chunk.Codec)
	if err != nil || need < 100000 || need > held || values != 2 {
		t.Fatalf("the pages take %d bytes and hold %d values (%v); the footer says %d bytes, the images 100008 in 2 rows", need, values, err, held)
	}
	if _, err := pq.imageRows(0, raw, make([]byte, need)); err != nil {
		t.Fatalf("decoding into the room the pages say: %v", err)
	}
	if _, err := pq.imageRows(0, raw, make([]byte, need-1)); !errors.Is(err, errTooBig) {
		t.Fatalf("decoding into less room than the pages say: %v, want errTooBig", err)
	}
	if _, _, err := pqfile.Need(raw[:len(raw)-1], pq.groups[0].chunk.Codec); err == nil {
		t.Fatal("a chunk cut short: its last page past its end, not said")
	}
}
