// The C half of package turbo: libjpeg-turbo's libjpeg API, reached
// through dlopen so that a binary runs (slower) where it is missing.
#ifndef TSOCK_JPEG_H
#define TSOCK_JPEG_H

typedef struct tsock_jpeg tsock_jpeg;

enum {
	TSOCK_JPEG_OK = 0,
	TSOCK_JPEG_BAD = -1,         // corrupt or truncated: message in tsock_jpeg_error
	TSOCK_JPEG_SMALL = -3,       // dst is too small
};

// tsock_jpeg_load returns 0, 1 when libjpeg.so.62 is missing, 2 when it
// lacks a symbol, 3 when tsock was built without jpeglib.h.
int tsock_jpeg_load(void);
tsock_jpeg *tsock_jpeg_new(void);
void tsock_jpeg_free(tsock_jpeg *j);
const char *tsock_jpeg_error(tsock_jpeg *j);
int tsock_jpeg_header(tsock_jpeg *j, const unsigned char *data, unsigned long n, int *w, int *h);
int tsock_jpeg_decode(tsock_jpeg *j, const unsigned char *data, unsigned long n, int num,
	int x, int y, int w, int h, int verify, unsigned char *dst, unsigned long cap,
	int *out_x, int *out_w);

#endif
