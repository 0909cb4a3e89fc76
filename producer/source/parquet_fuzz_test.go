package source

import (
	"bytes"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/tsock/tsock/producer/source/internal/pqfile"
)

// hubFile is a small Parquet file in the Hub's layout, of two row groups.
func hubFile(tb testing.TB) []byte {
	type image struct {
		Bytes []byte  `parquet:"bytes,optional"`
		Path  *string `parquet:"path,optional"`
	}
	type row struct {
		Image *image `parquet:"image,optional"`
		Label *int64 `parquet:"label,optional"`
	}
	var b bytes.Buffer
	w := parquet.NewGenericWriter[row](&b, parquet.Compression(&parquet.Snappy),
		parquet.KeyValueMetadata("huggingface", `{"info":{"features":{"label":{"_type":"ClassLabel","names":["a","b"]}}}}`))
	for g := range 2 {
		l := int64(g)
		if _, err := w.Write([]row{{Image: &image{Bytes: bytes.Repeat([]byte{byte(g)}, 300)}, Label: &l}, {Image: nil, Label: &l}}); err != nil {
			tb.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// FuzzHubClassNames: any metadata gives names or an error, never a
// panic; names are at most maxLabel+1, each within maxClassName bytes.
func FuzzHubClassNames(f *testing.F) {
	f.Add(`{"info":{"features":{"image":{"_type":"Image"},"label":{"_type":"ClassLabel","names":["cat","dog"]}}}}`, "label")
	f.Add(`{"info":{"features":{"label":{"_type":"Value","dtype":"int64"}}}}`, "label")
	f.Add(`{"info":{"features":{"label":{"_type":"ClassLabel","names":"cat"}}}}`, "label")
	f.Add(`{"info":{"features":[]}}`, "label")
	f.Add(`not json`, "label")
	f.Add(`{"info":{"features":{"fine":{"_type":"ClassLabel","names":["a"]}}}}`, "fine")
	f.Fuzz(func(t *testing.T, meta, label string) {
		names, err := hubClassNames(meta, label)
		if err != nil && names != nil {
			t.Fatalf("names %v with an error %v", names, err)
		}
		if len(names) > maxLabel+1 {
			t.Fatalf("%d names", len(names))
		}
		for _, n := range names {
			if len(n) > maxClassName {
				t.Fatalf("a name of %d bytes", len(n))
			}
		}
		if err != nil && !strings.Contains(err.Error(), "huggingface metadata") {
			t.Fatalf("an error that does not say what it read: %v", err)
		}
	})
}

// FuzzParseColumns: any --columns value parses into columns whose String
// parses back to the same, or is refused; never a panic.
func FuzzParseColumns(f *testing.F) {
	for _, s := range []string{"image=img", "label=cls", "image=jpg,label=", "image=a.b,label=c", "", "=", "image=", "x=y", "image=a,image=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseColumns(s)
		if err != nil {
			return
		}
		again, err := ParseColumns(c.String())
		if err != nil || again.image() != c.image() || again.label() != c.label() || again.NoLabel != c.NoLabel {
			t.Fatalf("%q: %+v prints %q, which parses to %+v (%v)", s, c, c.String(), again, err)
		}
	})
}

// FuzzParquetFile: any bytes open as a Parquet file and decode row group
// by row group, or are refused with an error; never a panic (pqfile
// reads what the file says: its thrift footer, its pages).
func FuzzParquetFile(f *testing.F) {
	f.Add(hubFile(f))
	f.Add([]byte("PAR1"))
	f.Add(append([]byte("PAR1garbage\x10\x00\x00\x00"), "PAR1"...))
	f.Fuzz(func(t *testing.T, data []byte) {
		pq, err := openParquet(data, int64(len(data)), Columns{})
		if err != nil {
			return
		}
		for g := range pq.groups {
			off, read, _ := pq.chunk(g)
			raw := data[off : off+read]
			need, _, err := pqfile.Need(raw, pq.groups[g].chunk.Codec) // the room decoding takes, as parquetAlone gives it
			if err != nil || need > 1<<20 {
				continue // refused, or more room than a test allocates
			}
			pq.imageRows(g, raw, make([]byte, need))
		}
	})
}
