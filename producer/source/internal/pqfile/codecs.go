package pqfile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// decompress fills dst, exactly, with src decompressed by codec: output
// short of dst, or past it, is an error, and no decoder writes past dst
// or holds more than its window (a page of zeros that says 1 KB and
// holds 4 GiB is refused after 1 KB).
func decompress(codec Codec, src, dst []byte) error {
	switch codec {
	case Uncompressed:
		if len(src) != len(dst) {
			return fmt.Errorf("%d bytes stored uncompressed, the header says %d", len(src), len(dst))
		}
		copy(dst, src)
		return nil
	case Snappy:
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return fmt.Errorf("snappy: %w", err)
		}
		if n != len(dst) {
			return fmt.Errorf("snappy says %d bytes, the header %d", n, len(dst))
		}
		out, err := snappy.Decode(dst, src)
		if err != nil {
			return fmt.Errorf("snappy: %w", err)
		}
		if len(out) != len(dst) || (len(out) > 0 && &out[0] != &dst[0]) {
			return fmt.Errorf("snappy gave %d bytes, the header says %d", len(out), len(dst))
		}
		return nil
	case LZ4Raw:
		return lz4Block(src, dst)
	case LZ4:
		return hadoopLZ4(src, dst)
	case Gzip:
		return stream(&gzipPool, src, dst)
	case Brotli:
		return stream(&brotliPool, src, dst)
	case Zstd:
		return stream(&zstdPool, src, dst)
	}
	return fmt.Errorf("the %s codec is not read here", codec)
}

// lz4Block decodes one LZ4 block into exactly dst.
func lz4Block(src, dst []byte) error {
	n, err := lz4.UncompressBlock(src, dst)
	if err != nil {
		return fmt.Errorf("lz4: %w (or more than the %d bytes the header says)", err, len(dst))
	}
	if n != len(dst) {
		return fmt.Errorf("lz4 gave %d bytes, the header says %d", n, len(dst))
	}
	return nil
}

// hadoopLZ4 decodes the deprecated LZ4 codec: Hadoop's frames (each a
// big-endian decompressed and compressed length, then an LZ4 block), or,
// as Arrow falls back to, one bare block where the bytes are no frames.
func hadoopLZ4(src, dst []byte) error {
	if framed(src, len(dst)) {
		out := dst
		for len(src) > 0 {
			d, c := int(binary.BigEndian.Uint32(src)), int(binary.BigEndian.Uint32(src[4:]))
			if err := lz4Block(src[8:8+c], out[:d]); err != nil {
				return err
			}
			src, out = src[8+c:], out[d:]
		}
		return nil
	}
	return lz4Block(src, dst)
}

// framed says whether src is Hadoop LZ4 frames whose lengths add up to
// exactly src and want decompressed bytes.
func framed(src []byte, want int) bool {
	total := 0
	for len(src) > 0 {
		if len(src) < 8 {
			return false
		}
		d, c := int64(binary.BigEndian.Uint32(src)), int64(binary.BigEndian.Uint32(src[4:]))
		if c > int64(len(src)-8) || d > int64(want-total) {
			return false
		}
		total += int(d)
		src = src[8+c:]
	}
	return total == want
}

// streamer is a pooled streaming decoder.
type streamer interface {
	reset(src []byte) (io.Reader, error)
}

type pool struct {
	sync.Pool
	name string
}

var (
	gzipPool   = pool{Pool: sync.Pool{New: func() any { return &gzipStreamer{} }}, name: "gzip"}
	brotliPool = pool{Pool: sync.Pool{New: func() any { return &brotliStreamer{} }}, name: "brotli"}
	zstdPool   = pool{Pool: sync.Pool{New: func() any { return &zstdStreamer{} }}, name: "zstd"}
)

// stream decodes src with a pooled decoder into exactly dst: one byte
// more than dst is an error, read as one byte, never as more. A decoder
// goes back to its pool only after a clean decode (one left mid-stream
// by an error is not trusted to reset).
func stream(p *pool, src, dst []byte) error {
	s := p.Get().(streamer)
	err := streamInto(p.name, s, src, dst)
	if err == nil {
		p.Put(s)
	}
	return err
}

func streamInto(name string, s streamer, src, dst []byte) error {
	r, err := s.reset(src)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if n, err := io.ReadFull(r, dst); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
			return fmt.Errorf("%s gave %d bytes, the header says %d", name, n, len(dst))
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	var one [1]byte
	if n, _ := r.Read(one[:]); n > 0 {
		return fmt.Errorf("%s gives more than the %d bytes the header says", name, len(dst))
	}
	return nil
}

type gzipStreamer struct{ r *gzip.Reader }

func (g *gzipStreamer) reset(src []byte) (io.Reader, error) {
	if g.r == nil {
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		g.r = r
		return r, nil
	}
	return g.r, g.r.Reset(bytes.NewReader(src))
}

type brotliStreamer struct{ r *brotli.Reader }

func (b *brotliStreamer) reset(src []byte) (io.Reader, error) {
	if b.r == nil {
		b.r = brotli.NewReader(bytes.NewReader(src))
		return b.r, nil
	}
	return b.r, b.r.Reset(bytes.NewReader(src))
}

// maxZstdWindow bounds the history a zstd frame may ask the decoder to
// keep: a Parquet page is some megabytes at most, and a frame whose
// window is larger is refused before its history is allocated.
const maxZstdWindow = 64 << 20

type zstdStreamer struct{ d *zstd.Decoder }

func (z *zstdStreamer) reset(src []byte) (io.Reader, error) {
	if z.d == nil {
		// One goroutine: a decoder of concurrency 1 decodes in the
		// caller's (no goroutine to own), its memory bounded by the
		// window.
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			return nil, err
		}
		z.d = d
	}
	return z.d, z.d.Reset(bytes.NewReader(src))
}
