package pqfile

import (
	"encoding/binary"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// FuzzFooter: any bytes walk as a footer, with its row groups, or are
// refused; never a panic, and what a walk allocates is bounded by the
// bytes (checked by the fuzzer's own memory limit).
func FuzzFooter(f *testing.F) {
	file := write(f, someRows(40, 3), &parquet.Snappy, nil, nil, 10, 1)
	n := int(binary.LittleEndian.Uint32(file[len(file)-8:]))
	f.Add(file[len(file)-8-n : len(file)-8])
	f.Add([]byte{0x15, 0x02, 0x19, 0xfc, 0x00})
	f.Add([]byte{0x19, 0xf9, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		ft, err := ParseFooter(b)
		if err != nil {
			return
		}
		cols := []int{}
		for _, l := range ft.Leaves {
			cols = append(cols, l.Index)
		}
		ft.Groups(cols, func(int, Group) error { return nil })
	})
}

// FuzzChunk: any bytes decode as a column chunk of any of the served
// columns and codecs, or are refused; never a panic, never past the
// limit given. Seeded with real chunks and with the hostile shapes: a
// page of zeros in each codec saying 1000 bytes, a run of 2^30 levels.
func FuzzChunk(f *testing.F) {
	for _, c := range []struct {
		codec parquetCodec
		v     int
	}{{&parquet.Snappy, 1}, {&parquet.Zstd, 2}, {&parquet.Gzip, 1}, {&parquet.Lz4Raw, 2}, {&parquet.Brotli, 1}} {
		file := write(f, someRows(30, 5), c.codec, &parquet.RLEDictionary, &parquet.DeltaBinaryPacked, 30, c.v)
		n := int(binary.LittleEndian.Uint32(file[len(file)-8:]))
		ft, err := ParseFooter(file[len(file)-8-n : len(file)-8])
		if err != nil {
			f.Fatal(err)
		}
		ft.Groups([]int{0, 2}, func(g int, grp Group) error {
			for k, ch := range grp.Chunks {
				f.Add(file[ch.Off:ch.Off+ch.Size], uint8(ch.Codec), uint8(k), uint8(1+k), grp.Rows)
			}
			return nil
		})
	}
	run := binary.AppendUvarint(nil, 1<<30<<1)
	levels := append(binary.LittleEndian.AppendUint32(nil, uint32(len(run)+1)), append(run, 0)...)
	f.Add(pageOf(f, int32(len(levels)), 10, levels), uint8(0), uint8(0), uint8(1), int64(10))
	zeros := make([]byte, 1<<20)
	for _, c := range []parquetCodec{&parquet.Snappy, &parquet.Gzip, &parquet.Zstd, &parquet.Lz4Raw, &parquet.Brotli} {
		b, _ := c.Encode(nil, zeros)
		f.Add(pageOf(f, 1000, 1, b), uint8(c.CompressionCodec()), uint8(0), uint8(0), int64(1))
	}
	f.Fuzz(func(t *testing.T, raw []byte, codec, typ, def uint8, rows int64) {
		rows %= 1 << 16 // a page's values cost a step each: the caller bounds rows by bytes
		col := Column{Type: []Type{ByteArray, Int64, Int32}[typ%3], MaxDef: int(def % 4), Codec: Codec(codec % 8)}
		const limit = 4 << 20
		Need(raw, col.Codec)
		var got int64
		Decode(raw, col, rows, limit, func(v Value) error {
			if got += int64(len(v.Bytes)); got > limit {
				t.Fatalf("values of %d bytes past the limit of %d", got, limit)
			}
			return nil
		})
	})
}

type parquetCodec = compress.Codec
