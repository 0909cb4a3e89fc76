package pqfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
)

// row is what the test files hold: an optional image struct (bytes and
// path) and an optional label, as the Hub writes them.
type row struct {
	img   []byte // nil: a null image
	label *int64
}

// write writes rows with parquet-go: the image's bytes and the label
// each in the given encoding, every column compressed with codec, in
// row groups of perGroup rows, data pages of version v.
func write(t testing.TB, rows []row, codec compress.Codec, imgEnc, labelEnc encoding.Encoding, perGroup, v int) []byte {
	t.Helper()
	bytesNode := parquet.Optional(parquet.Leaf(parquet.ByteArrayType))
	if imgEnc != nil {
		bytesNode = parquet.Encoded(bytesNode, imgEnc)
	}
	labelNode := parquet.Optional(parquet.Int(64))
	if labelEnc != nil {
		labelNode = parquet.Encoded(labelNode, labelEnc)
	}
	schema := parquet.NewSchema("hub", parquet.Group{
		"image": parquet.Optional(parquet.Group{
			"bytes": parquet.Compressed(bytesNode, codec),
			"path":  parquet.Compressed(parquet.Optional(parquet.String()), codec),
		}),
		"label": parquet.Compressed(labelNode, codec),
	})
	var b bytes.Buffer
	w := parquet.NewWriter(&b, schema, parquet.DataPageVersion(v), parquet.PageBufferSize(2048),
		parquet.KeyValueMetadata("huggingface", `{"x":1}`))
	for i, r := range rows {
		// Columns in the schema's order: image.bytes, image.path, label.
		var pr parquet.Row
		switch {
		case r.img == nil:
			pr = append(pr, parquet.Value{}.Level(0, 0, 0), parquet.Value{}.Level(0, 0, 1))
		default:
			pr = append(pr, parquet.ByteArrayValue(r.img).Level(0, 2, 0), parquet.Value{}.Level(0, 1, 1))
		}
		if r.label == nil {
			pr = append(pr, parquet.Value{}.Level(0, 0, 2))
		} else {
			pr = append(pr, parquet.Int64Value(*r.label).Level(0, 1, 2))
		}
		if _, err := w.WriteRows([]parquet.Row{pr}); err != nil {
			t.Fatal(err)
		}
		if (i+1)%perGroup == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func someRows(n int, seed uint64) []row {
	rng := rand.New(rand.NewPCG(seed, 1))
	rows := make([]row, n)
	for i := range rows {
		if rng.IntN(7) != 0 {
			img := make([]byte, 50+rng.IntN(900))
			for k := range img {
				img[k] = byte(rng.IntN(4)) // compressible, and some repeat
			}
			if rng.IntN(5) == 0 && i > 0 && rows[i-1].img != nil {
				img = rows[i-1].img // a repeat: dictionaries and prefixes
			}
			rows[i].img = img
		}
		if rng.IntN(9) != 0 {
			l := int64(rng.IntN(40)) - 3
			rows[i].label = &l
		}
	}
	return rows
}

// read reads a file back through this package: every row group's image
// and label chunks.
func read(t testing.TB, file []byte) ([]row, error) {
	n := int(binary.LittleEndian.Uint32(file[len(file)-8:]))
	f, err := ParseFooter(file[len(file)-8-n : len(file)-8])
	if err != nil {
		return nil, err
	}
	img, ok := f.Leaf("image", "bytes")
	if !ok {
		t.Fatalf("no image.bytes in %+v", f.Leaves)
	}
	lab, ok := f.Leaf("label")
	if !ok {
		t.Fatal("no label")
	}
	var rows []row
	err = f.Groups([]int{img.Index, lab.Index}, func(g int, grp Group) error {
		first := len(rows)
		for range grp.Rows {
			rows = append(rows, row{})
		}
		for k, l := range []Leaf{img, lab} {
			ch := grp.Chunks[k]
			col, err := ColumnOf(l, ch.Codec)
			if err != nil {
				return err
			}
			r := first
			err = Decode(file[ch.Off:ch.Off+ch.Size], col, grp.Rows, 1<<30, func(v Value) error {
				switch {
				case v.Null:
				case k == 0:
					rows[r].img = append([]byte{}, v.Bytes...)
				default:
					l := v.Int
					rows[r].label = &l
				}
				r++
				return nil
			})
			if err != nil {
				return fmt.Errorf("row group %d column %v: %w", g, l.Path, err)
			}
		}
		return nil
	})
	return rows, err
}

func same(t *testing.T, got, want []row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows read, %d written", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].img, want[i].img) || (got[i].img == nil) != (want[i].img == nil) {
			t.Fatalf("row %d: image of %d bytes read, %d written", i, len(got[i].img), len(want[i].img))
		}
		if (got[i].label == nil) != (want[i].label == nil) || got[i].label != nil && *got[i].label != *want[i].label {
			t.Fatalf("row %d: label %v read, %v written", i, got[i].label, want[i].label)
		}
	}
}

// TestReadsWhatParquetGoWrites: every codec, both page versions, every
// encoding parquet-go writes for these types, read back exactly.
func TestReadsWhatParquetGoWrites(t *testing.T) {
	codecs := []compress.Codec{&parquet.Uncompressed, &parquet.Snappy, &parquet.Gzip, &parquet.Brotli, &parquet.Zstd, &parquet.Lz4Raw}
	type encs struct {
		name       string
		img, label encoding.Encoding
	}
	encodings := []encs{
		{"plain", &parquet.Plain, &parquet.Plain},
		{"dictionary", &parquet.RLEDictionary, &parquet.RLEDictionary},
		{"delta", &parquet.DeltaByteArray, &parquet.DeltaBinaryPacked},
		{"delta-length", &parquet.DeltaLengthByteArray, &parquet.ByteStreamSplit},
	}
	rows := someRows(300, 7)
	for _, c := range codecs {
		for _, e := range encodings {
			for _, v := range []int{1, 2} {
				t.Run(fmt.Sprintf("%s/%s/v%d", c, e.name, v), func(t *testing.T) {
					file := write(t, rows, c, e.img, e.label, 70, v)
					got, err := read(t, file)
					if err != nil {
						t.Fatal(err)
					}
					same(t, got, rows)
				})
			}
		}
	}
}
