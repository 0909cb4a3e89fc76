// Package turbo decodes JPEGs with libjpeg-turbo, loaded at run time with
// dlopen("libturbojpeg.so.0") so that a build without the library still
// works (the producer then falls back to Go's decoder and says so).
//
// libjpeg-turbo can decode at 1/8 … 8/8 of the full size in the DCT
// domain, which is far cheaper than decoding everything and throwing most
// of it away when the crop will be downscaled anyway.
package turbo

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>

typedef void *tjhandle;
typedef tjhandle (*init_fn)(void);
typedef int (*header_fn)(tjhandle, const unsigned char *, unsigned long, int *, int *, int *, int *);
typedef int (*decode_fn)(tjhandle, const unsigned char *, unsigned long, unsigned char *, int, int, int, int, int);
typedef int (*destroy_fn)(tjhandle);
typedef char *(*error_fn)(tjhandle);

static init_fn tj_init;
static header_fn tj_header;
static decode_fn tj_decode;
static destroy_fn tj_destroy;
static error_fn tj_error;

// tsock_tj_load returns 0, or 1 when the library is missing, 2 when a
// symbol is.
static int tsock_tj_load(void) {
	void *lib = dlopen("libturbojpeg.so.0", RTLD_NOW | RTLD_LOCAL);
	if (!lib) return 1;
	tj_init = (init_fn)dlsym(lib, "tjInitDecompress");
	tj_header = (header_fn)dlsym(lib, "tjDecompressHeader3");
	tj_decode = (decode_fn)dlsym(lib, "tjDecompress2");
	tj_destroy = (destroy_fn)dlsym(lib, "tjDestroy");
	tj_error = (error_fn)dlsym(lib, "tjGetErrorStr2");
	if (!tj_init || !tj_header || !tj_decode || !tj_destroy || !tj_error) return 2;
	return 0;
}

static tjhandle tsock_tj_init(void) { return tj_init(); }
static int tsock_tj_header(tjhandle h, const unsigned char *buf, unsigned long n, int *w, int *ht) {
	int sub, cs;
	return tj_header(h, buf, n, w, ht, &sub, &cs);
}
// Pixel format 0 is TJPF_RGB.
static int tsock_tj_decode(tjhandle h, const unsigned char *buf, unsigned long n, unsigned char *dst, int w, int ht, int flags) {
	return tj_decode(h, buf, n, dst, w, 3 * w, ht, 0, flags);
}
static int tsock_tj_destroy(tjhandle h) { return tj_destroy(h); }
static const char *tsock_tj_error(tjhandle h) { return tj_error(h); }
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// ErrNoLibrary: libturbojpeg.so.0 (Debian libturbojpeg0) is not installed.
var ErrNoLibrary = errors.New("libturbojpeg.so.0 not found (Debian: apt-get install libturbojpeg0)")

var (
	loadOnce sync.Once
	loadErr  error
)

// Available loads the library once and reports whether it can be used.
func Available() error {
	loadOnce.Do(func() {
		switch C.tsock_tj_load() {
		case 1:
			loadErr = ErrNoLibrary
		case 2:
			loadErr = fmt.Errorf("libturbojpeg.so.0 lacks the TurboJPEG 2 API: %w", ErrNoLibrary)
		}
	})
	return loadErr
}

// Decoder is one decompressor; not safe for concurrent use (one per worker).
type Decoder struct {
	h C.tjhandle
}

// NewDecoder returns a decoder, or ErrNoLibrary.
func NewDecoder() (*Decoder, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	h := C.tsock_tj_init()
	if h == nil {
		return nil, errors.New("tjInitDecompress failed")
	}
	return &Decoder{h: h}, nil
}

// Close frees the decompressor.
func (d *Decoder) Close() {
	if d.h != nil {
		C.tsock_tj_destroy(d.h)
		d.h = nil
	}
}

func (d *Decoder) err(what string) error {
	return fmt.Errorf("%s: %s", what, C.GoString(C.tsock_tj_error(d.h)))
}

// Header returns a JPEG's full size.
func (d *Decoder) Header(data []byte) (w, h int, err error) {
	if len(data) == 0 {
		return 0, 0, errors.New("empty JPEG")
	}
	var cw, ch C.int
	if C.tsock_tj_header(d.h, (*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), &cw, &ch) != 0 {
		return 0, 0, d.err("read JPEG header")
	}
	return int(cw), int(ch), nil
}

// Scaled is the size of a side of full length n decoded at num/8.
func Scaled(n, num int) int { return (n*num + 7) / 8 }

// Decode decodes data at num/8 of its full size (num 1 to 8) into dst as
// packed RGB; dst must hold 3·Scaled(w)·Scaled(h) bytes. Corrupt data,
// warnings included, is an error: a half-decoded image is not a sample.
func (d *Decoder) Decode(data []byte, w, h, num int, dst []byte) error {
	if num < 1 || num > 8 {
		return fmt.Errorf("scale %d/8: want 1/8 to 8/8", num)
	}
	sw, sh := Scaled(w, num), Scaled(h, num)
	if len(dst) < 3*sw*sh || len(data) == 0 {
		return fmt.Errorf("decode %dx%d at %d/8: buffer of %d bytes too small", w, h, num, len(dst))
	}
	const stopOnWarning = 8192 // TJFLAG_STOPONWARNING
	if C.tsock_tj_decode(d.h, (*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)),
		(*C.uchar)(unsafe.Pointer(&dst[0])), C.int(sw), C.int(sh), stopOnWarning) != 0 {
		return d.err("decode JPEG")
	}
	return nil
}
