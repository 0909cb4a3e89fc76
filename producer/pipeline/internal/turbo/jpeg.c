// Region decoding with libjpeg-turbo. jpeg_skip_scanlines and
// jpeg_crop_scanline (libjpeg-turbo ≥ 1.5) let a random crop decode only
// its own rows and iMCU columns, at a DCT-domain scale: most of a photo is
// never inverse-transformed. TurboJPEG 2.x has no such call.
#include <dlfcn.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpeg.h"

#if __has_include(<jpeglib.h>)
#include <jpeglib.h>
#include <jerror.h>

// Prototypes come from the header through __typeof__, so they cannot drift.
static __typeof__(jpeg_std_error) *p_std_error;
static __typeof__(jpeg_CreateDecompress) *p_create;
static __typeof__(jpeg_destroy_decompress) *p_destroy;
static __typeof__(jpeg_mem_src) *p_mem_src;
static __typeof__(jpeg_read_header) *p_read_header;
static __typeof__(jpeg_start_decompress) *p_start;
static __typeof__(jpeg_read_scanlines) *p_read_scanlines;
static __typeof__(jpeg_skip_scanlines) *p_skip_scanlines;
static __typeof__(jpeg_crop_scanline) *p_crop_scanline;
static __typeof__(jpeg_finish_decompress) *p_finish;
static __typeof__(jpeg_abort_decompress) *p_abort;

int tsock_jpeg_load(void) {
	void *lib = dlopen("libjpeg.so.62", RTLD_NOW | RTLD_LOCAL);
	if (!lib) return 1;
#define SYM(var, name) if (!(var = (__typeof__(var))dlsym(lib, name))) return 2
	SYM(p_std_error, "jpeg_std_error");
	SYM(p_create, "jpeg_CreateDecompress");
	SYM(p_destroy, "jpeg_destroy_decompress");
	SYM(p_mem_src, "jpeg_mem_src");
	SYM(p_read_header, "jpeg_read_header");
	SYM(p_start, "jpeg_start_decompress");
	SYM(p_read_scanlines, "jpeg_read_scanlines");
	SYM(p_skip_scanlines, "jpeg_skip_scanlines");
	SYM(p_crop_scanline, "jpeg_crop_scanline");
	SYM(p_finish, "jpeg_finish_decompress");
	SYM(p_abort, "jpeg_abort_decompress");
#undef SYM
	return 0;
}

struct tsock_jpeg {
	struct jpeg_decompress_struct cinfo;
	struct jpeg_error_mgr err;
	jmp_buf jump;
	char msg[JMSG_LENGTH_MAX];
};

// cmyk_to_rgb converts n CMYK pixels as Pillow does (its cmyk2rgb,
// rounding included), after undoing Adobe's inversion: Photoshop, and PIL,
// store CMYK inverted and mark the file with an Adobe segment.
static void cmyk_to_rgb(const unsigned char *in, unsigned char *out, unsigned n, int inverted) {
	int flip = inverted ? 255 : 0;
	for (unsigned i = 0; i < n; i++, in += 4, out += 3) {
		int nk = 255 - (in[3] ^ flip);
		for (int k = 0; k < 3; k++) {
			int t = (in[k] ^ flip) * nk + 128;
			out[k] = (unsigned char)(nk - (((t >> 8) + t) >> 8));
		}
	}
}

// libjpeg's default error_exit calls exit(): jump back to the call instead.
static void on_error(j_common_ptr c) {
	tsock_jpeg *j = (tsock_jpeg *)c->client_data;
	c->err->format_message(c, j->msg);
	longjmp(j->jump, 1);
}

// A warning means corrupt data (a half-decoded image is not a sample),
// except stray bytes between markers, which many real photos carry and
// every decoder ignores.
static void on_message(j_common_ptr c, int level) {
	if (level >= 0 || c->err->msg_code == JWRN_EXTRANEOUS_DATA) return;
	on_error(c);
}

tsock_jpeg *tsock_jpeg_new(void) {
	tsock_jpeg *j = calloc(1, sizeof *j);
	if (!j) return NULL;
	j->cinfo.err = p_std_error(&j->err);
	j->err.error_exit = on_error;
	j->err.emit_message = on_message;
	j->cinfo.client_data = j;
	if (setjmp(j->jump)) {
		free(j);
		return NULL;
	}
	p_create(&j->cinfo, JPEG_LIB_VERSION, sizeof j->cinfo);
	return j;
}

void tsock_jpeg_free(tsock_jpeg *j) {
	p_destroy(&j->cinfo);
	free(j);
}

const char *tsock_jpeg_error(tsock_jpeg *j) { return j->msg; }

// fail ends the image in progress; msg, if given, becomes the error.
static int fail(tsock_jpeg *j, const char *msg) {
	if (msg) snprintf(j->msg, sizeof j->msg, "%s", msg);
	p_abort(&j->cinfo);
	return TSOCK_JPEG_BAD;
}

int tsock_jpeg_header(tsock_jpeg *j, const unsigned char *data, unsigned long n, int *w, int *h) {
	struct jpeg_decompress_struct *c = &j->cinfo;
	if (setjmp(j->jump)) {
		p_abort(c);
		return TSOCK_JPEG_BAD;
	}
	p_mem_src(c, data, n);
	p_read_header(c, TRUE);
	*w = c->image_width;
	*h = c->image_height;
	p_abort(c);
	return TSOCK_JPEG_OK;
}

// tsock_jpeg_decode decodes rows [y, y+h) of the image scaled to num/8, at
// least columns [x, x+w) of them, into dst (rows of 3·out_w bytes); the
// decoded columns start at out_x (x rounded down to an iMCU column). With
// verify, it reads the rest of the file too, so that damage outside the
// region is found: partial decodes of a file that verified cannot fail.
int tsock_jpeg_decode(tsock_jpeg *j, const unsigned char *data, unsigned long n, int num,
	int x, int y, int w, int h, int verify, unsigned char *dst, unsigned long cap,
	int *out_x, int *out_w) {
	struct jpeg_decompress_struct *c = &j->cinfo;
	if (setjmp(j->jump)) {
		p_abort(c);
		return TSOCK_JPEG_BAD;
	}
	p_mem_src(c, data, n);
	p_read_header(c, TRUE);
	// libjpeg turns YCCK into CMYK but neither into RGB: that is done here,
	// row by row, as PIL does it.
	int cmyk = c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK;
	int inverted = cmyk && c->saw_Adobe_marker;
	c->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
	c->scale_num = num;
	c->scale_denom = 8;
	p_start(c);
	if (x < 0 || y < 0 || w < 1 || h < 1 || (unsigned)(x + w) > c->output_width ||
		(unsigned)(y + h) > c->output_height) {
		snprintf(j->msg, sizeof j->msg, "region %dx%d+%d+%d outside the %ux%u image", w, h, x, y,
			c->output_width, c->output_height);
		return fail(j, NULL);
	}
	// Fancy upsampling treats the cut edges of a cropped row as the
	// image's edges: decode one more column each side, outside the region.
	JDIMENSION xo = x > 0 ? x - 1 : 0;
	JDIMENSION cw = (unsigned)(x + w) < c->output_width ? x + w + 1 - xo : c->output_width - xo;
	if (cw < c->output_width) p_crop_scanline(c, &xo, &cw);
	unsigned long stride = 3ul * c->output_width;
	if (cap < stride * h) {
		p_abort(c);
		return TSOCK_JPEG_SMALL;
	}
	// CMYK rows are decoded into the image pool, then converted into dst.
	JSAMPARRAY cmyk_row = cmyk ? c->mem->alloc_sarray((j_common_ptr)c, JPOOL_IMAGE, 4 * c->output_width, 1) : NULL;
	if (y > 0) p_skip_scanlines(c, y);
	for (int r = 0; r < h; r++) {
		JSAMPROW row = dst + stride * r;
		if (p_read_scanlines(c, cmyk ? cmyk_row : &row, 1) != 1) return fail(j, "decoder returned no row");
		if (cmyk) cmyk_to_rgb(cmyk_row[0], row, c->output_width, inverted);
	}
	if (verify) {
		// Skipping to the very end returns without decoding: stop one
		// row short and read it (into the image pool, not dst).
		JDIMENSION left = c->output_height - c->output_scanline;
		if (left > 1) p_skip_scanlines(c, left - 1);
		if (left > 0) {
			JSAMPARRAY last = c->mem->alloc_sarray((j_common_ptr)c, JPOOL_IMAGE, 4 * c->output_width, 1);
			if (p_read_scanlines(c, last, 1) != 1) return fail(j, "decoder returned no row");
		}
		p_finish(c);
	} else {
		p_abort(c);
	}
	*out_x = xo;
	*out_w = c->output_width;
	return TSOCK_JPEG_OK;
}

#else // built without libjpeg's headers: the Go decoder does the work

int tsock_jpeg_load(void) { return 3; }
tsock_jpeg *tsock_jpeg_new(void) { return NULL; }
void tsock_jpeg_free(tsock_jpeg *j) {}
const char *tsock_jpeg_error(tsock_jpeg *j) { return "not built"; }
int tsock_jpeg_header(tsock_jpeg *j, const unsigned char *data, unsigned long n, int *w, int *h) {
	return TSOCK_JPEG_BAD;
}
int tsock_jpeg_decode(tsock_jpeg *j, const unsigned char *data, unsigned long n, int num,
	int x, int y, int w, int h, int verify, unsigned char *dst, unsigned long cap,
	int *out_x, int *out_w) {
	return TSOCK_JPEG_BAD;
}

#endif
