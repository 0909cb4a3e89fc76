package turbo

/*
#cgo CFLAGS: -O2
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "jpeg.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// ErrNoLibrary: libjpeg-turbo cannot be used; the error says why.
var ErrNoLibrary = errors.New("libjpeg-turbo unavailable")

var (
	loadOnce sync.Once
	loadErr  error
)

// Available loads the library once and reports whether it can be used.
func Available() error {
	loadOnce.Do(func() {
		switch C.tsock_jpeg_load() {
		case 1:
			loadErr = fmt.Errorf("%w: libjpeg.so.62 not found (Debian: apt-get install libjpeg62-turbo)", ErrNoLibrary)
		case 2:
			loadErr = fmt.Errorf("%w: libjpeg.so.62 lacks jpeg_skip_scanlines/jpeg_crop_scanline (want libjpeg-turbo ≥ 1.5)", ErrNoLibrary)
		case 3:
			loadErr = fmt.Errorf("%w: built without jpeglib.h (Debian: apt-get install libjpeg62-turbo-dev, then rebuild)", ErrNoLibrary)
		}
	})
	return loadErr
}

// Decoder is one decompressor; not safe for concurrent use (one per worker).
type Decoder struct {
	j *C.tsock_jpeg
}

// NewDecoder returns a decoder, or ErrNoLibrary.
func NewDecoder() (*Decoder, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	j := C.tsock_jpeg_new()
	if j == nil {
		return nil, errors.New("create JPEG decompressor: out of memory")
	}
	return &Decoder{j: j}, nil
}

// Close frees the decompressor.
func (d *Decoder) Close() {
	if d.j != nil {
		C.tsock_jpeg_free(d.j)
		d.j = nil
	}
}

func (d *Decoder) err(what string) error {
	return fmt.Errorf("%s: %s", what, C.GoString(C.tsock_jpeg_error(d.j)))
}

func ptr(b []byte) *C.uchar { return (*C.uchar)(unsafe.Pointer(unsafe.SliceData(b))) }

// Header returns a JPEG's full size.
func (d *Decoder) Header(data []byte) (w, h int, err error) {
	if len(data) == 0 {
		return 0, 0, errors.New("empty JPEG")
	}
	var cw, ch C.int
	if C.tsock_jpeg_header(d.j, ptr(data), C.ulong(len(data)), &cw, &ch) != C.TSOCK_JPEG_OK {
		return 0, 0, d.err("read JPEG header")
	}
	return int(cw), int(ch), nil
}

// Scaled is the size of a side of full length n decoded at num/8.
func Scaled(n, num int) int { return (n*num + 7) / 8 }

// Region is a rectangle of the image decoded at num/8.
type Region struct{ X, Y, W, H int }

// Decode decodes region r of data scaled to num/8 (1 to 8) into dst as
// packed RGB rows of 3·width bytes, where the decoded columns [x, x+width)
// cover r's (x is r.X rounded down to an iMCU column). dst must hold
// 3·Scaled(full width)·r.H bytes. With verify the whole file is decoded
// and checked, which costs more.
func (d *Decoder) Decode(data []byte, num int, r Region, verify bool, dst []byte) (x, width int, err error) {
	if num < 1 || num > 8 {
		return 0, 0, fmt.Errorf("scale %d/8: want 1/8 to 8/8", num)
	}
	if len(data) == 0 || len(dst) == 0 {
		return 0, 0, errors.New("decode JPEG: empty input or output")
	}
	var cx, cw C.int
	v := C.int(0)
	if verify {
		v = 1
	}
	switch C.tsock_jpeg_decode(d.j, ptr(data), C.ulong(len(data)), C.int(num),
		C.int(r.X), C.int(r.Y), C.int(r.W), C.int(r.H), v, ptr(dst), C.ulong(len(dst)), &cx, &cw) {
	case C.TSOCK_JPEG_OK:
		return int(cx), int(cw), nil
	case C.TSOCK_JPEG_SMALL:
		return 0, 0, fmt.Errorf("decode JPEG region %v at %d/8: buffer of %d bytes too small", r, num, len(dst))
	}
	return 0, 0, d.err("decode JPEG")
}
