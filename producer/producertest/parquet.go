package producertest

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

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
	// Codecs are the files' compression, in turn (see WriteParquet).
	Codecs []string
	// Meta is the "huggingface" metadata; nil: the Hub's, naming dir's
	// classes; "": none.
	Meta *string
	// ExtraBytes in each row's extra column.
	ExtraBytes int
	// Edit, if set, changes a row before it is written (a null image).
	Edit func(i int, row *HubRow)
	// PageBytes bounds a page (0: 1 MiB, as pyarrow's): small pages make
	// a row's page much less than its row group.
	PageBytes int
}

// Parquet writes the samples of ImageFolder dir, in its order, as
// Parquet files in the Hub's layout (an image struct of bytes and path,
// an int64 label, the class names in the "huggingface" metadata) into a
// new temp dir, and returns a brace spec naming them all.
func Parquet(t testing.TB, dir string, o ParquetOptions) string {
	t.Helper()
	src, err := source.Open(context.Background(), dir, source.Options{})
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
		// As pyarrow writes the Hub's files: pages of 1 MiB, no page
		// statistics for a column of images (Arrow stores none for values
		// over 4 KiB).
		opts := []parquet.WriterOption{parquet.PageBufferSize(1 << 20), parquet.SkipPageBounds("image", "bytes"), parquet.SkipPageStatistics("image", "bytes")}
		if o.PageBytes > 0 {
			opts = append(opts, parquet.PageBufferSize(o.PageBytes))
		}
		WriteParquet(t, filepath.Join(out, fmt.Sprintf("train-%05d.parquet", f)), rows, o.RowsPerGroup, o.Codecs[f%len(o.Codecs)], *o.Meta, opts...)
	}
	return fmt.Sprintf("%s/train-{00000..%05d}.parquet", out, o.Files-1)
}

// WriteParquet writes rows to path in row groups of perGroup rows,
// compressed with codec (snappy, zstd, lz4raw, gzip, brotli or none), with meta as its
// "huggingface" metadata ("": none), and more options.
func WriteParquet[T any](t testing.TB, path string, rows []T, perGroup int, codec, meta string, more ...parquet.WriterOption) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]parquet.WriterOption{parquet.MaxRowsPerRowGroup(int64(perGroup))}, more...)
	switch codec {
	case "snappy":
		opts = append(opts, parquet.Compression(&parquet.Snappy))
	case "zstd":
		opts = append(opts, parquet.Compression(&parquet.Zstd))
	case "lz4raw":
		opts = append(opts, parquet.Compression(&parquet.Lz4Raw))
	case "gzip":
		opts = append(opts, parquet.Compression(&parquet.Gzip))
	case "brotli":
		opts = append(opts, parquet.Compression(&parquet.Brotli))
	case "none":
	default:
		t.Fatalf("codec %q", codec)
	}
	if meta != "" {
		opts = append(opts, parquet.KeyValueMetadata("huggingface", meta))
	}
	w := parquet.NewGenericWriter[T](f, opts...)
	for at := 0; at < len(rows); at += perGroup {
		for k := at; k < min(at+perGroup, len(rows)); k++ { // a row at a time: a page closes where its bytes reach PageBufferSize
			if _, err := w.Write(rows[k : k+1]); err != nil {
				t.Fatal(err)
			}
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

// SpliceParquet writes to path the row groups of files (Parquet files of
// one schema, each with its own codec), in turn, as one file: its row
// groups keep their codecs, as a file appended to by different writers
// has them (legal Parquet; parquet-go reads every group with the first's).
func SpliceParquet(t testing.TB, path string, files ...string) {
	t.Helper()
	out := []byte("PAR1")
	var meta format.FileMetaData
	for k, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
		var m format.FileMetaData
		if err := thrift.Unmarshal(new(thrift.CompactProtocol), data[len(data)-8-n:len(data)-8], &m); err != nil {
			t.Fatal(err)
		}
		shift := int64(len(out)) - 4 // the file's data, after its magic, goes at the end of out's
		out = append(out, data[4:len(data)-8-n]...)
		for g := range m.RowGroups {
			rg := &m.RowGroups[g]
			for c := range rg.Columns {
				md := &rg.Columns[c].MetaData
				md.DataPageOffset += shift
				if md.DictionaryPageOffset != 0 {
					md.DictionaryPageOffset += shift
				}
				rg.Columns[c].FileOffset += shift
			}
			rg.FileOffset += shift
			rg.Ordinal = int16(len(meta.RowGroups))
			meta.RowGroups = append(meta.RowGroups, *rg)
		}
		if k == 0 {
			meta.Version, meta.Schema, meta.KeyValueMetadata, meta.CreatedBy = m.Version, m.Schema, m.KeyValueMetadata, m.CreatedBy
		}
		meta.NumRows += m.NumRows
	}
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &meta)
	if err != nil {
		t.Fatal(err)
	}
	out = binary.LittleEndian.AppendUint32(append(out, footer...), uint32(len(footer)))
	if err := os.WriteFile(path, append(out, "PAR1"...), 0o644); err != nil {
		t.Fatal(err)
	}
}
