package producertest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/tsock/tsock/producer/source"
)

// HubImage is the Hub's image feature: a struct of the file's bytes and
// its name, each nullable.
type HubImage struct {
	Bytes []byte  `parquet:"bytes,optional"`
	Path  *string `parquet:"path,optional"`
}

// HubRow is a row of a Hub image dataset's Parquet file, with a column
// of other bytes beside (a caption, a mask) that tsock must never read.
type HubRow struct {
	Image *HubImage `parquet:"image,optional"`
	Label *int64    `parquet:"label,optional"`
	Extra []byte    `parquet:"extra"`
}

// ParquetOptions shape the files Parquet writes.
type ParquetOptions struct {
	Files        int
	RowsPerGroup int
	// Codecs are the files' compression, in turn: snappy, zstd or none.
	Codecs []string
	// Meta is the "huggingface" metadata; nil: the Hub's, naming dir's
	// classes; "": none.
	Meta *string
	// ExtraBytes in each row's extra column.
	ExtraBytes int
	// Edit, if set, changes a row before it is written (a null image).
	Edit func(i int, row *HubRow)
}

// Parquet writes the samples of ImageFolder dir, in its order, as
// Parquet files in the Hub's layout (an image struct of bytes and path,
// an int64 label, the class names in the "huggingface" metadata) into a
// new temp dir, and returns a brace spec naming them all.
func Parquet(t testing.TB, dir string, o ParquetOptions) string {
	t.Helper()
	src, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if o.Meta == nil {
		m := HubMeta(src.Classes())
		o.Meta = &m
	}
	if len(o.Codecs) == 0 {
		o.Codecs = []string{"snappy", "zstd"}
	}
	out := t.TempDir()
	per := (src.Len() + o.Files - 1) / o.Files
	for f := range o.Files {
		var rows []HubRow
		for i := f * per; i < min((f+1)*per, src.Len()); i++ {
			img, err := os.ReadFile(src.Name(i))
			if err != nil {
				t.Fatal(err)
			}
			name, label := filepath.Base(src.Name(i)), int64(src.Label(i))
			row := HubRow{Image: &HubImage{Bytes: img, Path: &name}, Label: &label, Extra: make([]byte, o.ExtraBytes)}
			if o.Edit != nil {
				o.Edit(i, &row)
			}
			rows = append(rows, row)
		}
		WriteParquet(t, filepath.Join(out, fmt.Sprintf("train-%05d.parquet", f)), rows, o.RowsPerGroup, o.Codecs[f%len(o.Codecs)], *o.Meta)
	}
	return fmt.Sprintf("%s/train-{00000..%05d}.parquet", out, o.Files-1)
}

// WriteParquet writes rows to path in row groups of perGroup rows,
// compressed with codec (snappy, zstd or none), with meta as its
// "huggingface" metadata ("": none).
func WriteParquet[T any](t testing.TB, path string, rows []T, perGroup int, codec, meta string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := []parquet.WriterOption{parquet.MaxRowsPerRowGroup(int64(perGroup))}
	switch codec {
	case "snappy":
		opts = append(opts, parquet.Compression(&parquet.Snappy))
	case "zstd":
		opts = append(opts, parquet.Compression(&parquet.Zstd))
	}
	if meta != "" {
		opts = append(opts, parquet.KeyValueMetadata("huggingface", meta))
	}
	w := parquet.NewGenericWriter[T](f, opts...)
	for at := 0; at < len(rows); at += perGroup {
		if _, err := w.Write(rows[at:min(at+perGroup, len(rows))]); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// HubMeta is the Hub's metadata for an image dataset whose label is a
// ClassLabel of names.
func HubMeta(names []string) string {
	m := map[string]any{"info": map[string]any{"features": map[string]any{
		"image": map[string]any{"_type": "Image"},
		"label": map[string]any{"_type": "ClassLabel", "names": names},
	}}}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// ImageChunks is the bytes of the image column's chunks of the Parquet
// files in dir, and their row groups: what an epoch reads of them.
func ImageChunks(tb testing.TB, dir string) (bytes int64, groups int) {
	tb.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.parquet"))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			tb.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			tb.Fatal(err)
		}
		pf, err := parquet.OpenFile(f, st.Size())
		if err != nil {
			tb.Fatal(err)
		}
		leaf, _ := pf.Schema().Lookup("image", "bytes")
		for _, rg := range pf.Metadata().RowGroups {
			bytes += rg.Columns[leaf.ColumnIndex].MetaData.TotalCompressedSize
			groups++
		}
		f.Close()
	}
	return bytes, groups
}
