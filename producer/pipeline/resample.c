#include "resample.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static inline uint8_t clamp8(int32_t v) {
	v = (v + (1 << (TSOCK_PRECISION - 1))) >> TSOCK_PRECISION;
	return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

// Two passes, both along contiguous memory so that the compiler
// vectorises the filters (clones for AVX2 where the CPU has it; SSE2
// otherwise): the vertical pass stores its rows transposed and planar,
// so that the horizontal one filters rows of that too, where a pass over
// packed RGB gathered three bytes per tap. Each pass makes 16 rows (or
// columns) into a small buffer and transposes them 16x16 bytes at a time
// (SSE2), so that its stores are 16 contiguous bytes, not one byte per
// row: one byte per row was most of each pass's time.

// block16 holds 16 rows of 16 bytes.
typedef struct {
	uint8_t b[16][16];
} block16;

// transpose16 transposes 16 rows of 16 bytes (row j at in + j·stride)
// into t: t->b[i][j] = in[j·stride + i].
static inline void transpose16(const uint8_t *in, long stride, block16 *t) {
#if defined(__SSE2__)
	__m128i r[16], a[16], b[16], c[16];
	for (int j = 0; j < 16; j++) r[j] = _mm_loadu_si128((const __m128i *)(in + j * stride));
	for (int k = 0; k < 8; k++) { // bytes: rows 2k, 2k+1
		a[2 * k] = _mm_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
		a[2 * k + 1] = _mm_unpackhi_epi8(r[2 * k], r[2 * k + 1]);
	}
	for (int m = 0; m < 4; m++) { // 16-bit: rows 4m..4m+3, columns in fours
		b[4 * m] = _mm_unpacklo_epi16(a[4 * m], a[4 * m + 2]);
		b[4 * m + 1] = _mm_unpackhi_epi16(a[4 * m], a[4 * m + 2]);
		b[4 * m + 2] = _mm_unpacklo_epi16(a[4 * m + 1], a[4 * m + 3]);
		b[4 * m + 3] = _mm_unpackhi_epi16(a[4 * m + 1], a[4 * m + 3]);
	}
	for (int n = 0; n < 2; n++) { // 32-bit: rows 8n..8n+7, columns in twos
		for (int g = 0; g < 4; g++) {
			c[8 * n + 2 * g] = _mm_unpacklo_epi32(b[8 * n + g], b[8 * n + 4 + g]);
			c[8 * n + 2 * g + 1] = _mm_unpackhi_epi32(b[8 * n + g], b[8 * n + 4 + g]);
		}
	}
	for (int h = 0; h < 8; h++) { // 64-bit: whole columns
		_mm_storeu_si128((__m128i *)t->b[2 * h], _mm_unpacklo_epi64(c[h], c[8 + h]));
		_mm_storeu_si128((__m128i *)t->b[2 * h + 1], _mm_unpackhi_epi64(c[h], c[8 + h]));
	}
#else
	for (int j = 0; j < 16; j++)
		for (int i = 0; i < 16; i++) t->b[i][j] = in[j * stride + i];
#endif
}

// planar_rows stores ny rows of n packed RGB bytes (row j at rows + j·n)
// as out[c·W·S + x·S + y0 + j], for byte i = 3x + c.
static void planar_rows(const uint8_t *rows, int n, int ny, uint8_t *out, long plane, int S, int y0) {
	int i0 = 0;
	if (ny == 16) {
		block16 t;
		for (; i0 + 16 <= n; i0 += 16) {
			transpose16(rows + i0, n, &t);
			int x = i0 / 3, c = i0 % 3;
			for (int k = 0; k < 16; k++) {
				uint8_t *o = out + c * plane + (long)x * S + y0;
				for (int j = 0; j < 16; j++) o[j] = t.b[k][j];
				if (++c == 3) c = 0, x++;
			}
		}
	}
	for (int i = i0; i < n; i++) {
		uint8_t *o = out + (i % 3) * plane + (long)(i / 3) * S + y0;
		for (int j = 0; j < ny; j++) o[j] = rows[(long)j * n + i];
	}
}

// filter makes one row of n outputs from k input rows stride bytes
// apart, from p on, weighted by ws: both passes' work. Inlined into each
// pass's clones, so that it is vectorised for each.
static inline __attribute__((always_inline)) void filter(const uint8_t *p, long stride, const int32_t *ws, int k,
	int n, int32_t *acc, uint8_t *out) {
	int32_t w0 = ws[0];
	for (int i = 0; i < n; i++) acc[i] = w0 * p[i];
	for (int t = 1; t < k; t++) {
		const uint8_t *q = p + (long)t * stride;
		int32_t wt = ws[t];
		for (int i = 0; i < n; i++) acc[i] += wt * q[i];
	}
	for (int i = 0; i < n; i++) out[i] = clamp8(acc[i]);
}

__attribute__((target_clones("avx2", "default")))
void tsock_vertical_t(const uint8_t *src, long stride, long x0, int W, int S,
	const int32_t *first, const int32_t *w, int k, int32_t *acc, uint8_t *rows, uint8_t *out) {
	int n = 3 * W;
	long plane = (long)W * S;
	for (int y0 = 0; y0 < S; y0 += 16) {
		int ny = S - y0 < 16 ? S - y0 : 16;
		for (int j = 0; j < ny; j++) {
			int y = y0 + j;
			filter(src + (long)first[y] * stride + x0, stride, w + (long)y * k, k, n, acc, rows + (long)j * n);
		}
		planar_rows(rows, n, ny, out, plane, S, y0);
	}
}

// TILE output columns are made at a time, then written out row by row.
#define TILE 16

__attribute__((target_clones("avx2", "default")))
void tsock_horizontal_t(const uint8_t *in, int W, int S, const int32_t *first,
	const int32_t *w, int k, int flip, int nchw, int32_t *acc, uint8_t *tile, uint8_t *dst) {
	long plane = (long)W * S, oplane = (long)S * S;
	for (int c = 0; c < 3; c++) {
		const uint8_t *T = in + c * plane;
		for (int x0 = 0; x0 < S; x0 += TILE) {
			int nx = S - x0 < TILE ? S - x0 : TILE;
			// Tile row r is output column ox0 + r: mirrored columns are
			// stored in reverse, so that the rows ascend in the output.
			int ox0 = flip ? S - x0 - nx : x0;
			for (int j = 0; j < nx; j++) {
				int x = x0 + j;
				filter(T + (long)first[x] * S, S, w + (long)x * k, k, S, acc, tile + (long)(flip ? nx - 1 - j : j) * S);
			}
			int y = 0;
			if (nchw && nx == TILE) {
				block16 t;
				for (; y + 16 <= S; y += 16) {
					transpose16(tile + y, S, &t);
					for (int m = 0; m < 16; m++) {
						uint8_t *d = dst + c * oplane + (long)(y + m) * S + ox0;
						for (int r = 0; r < 16; r++) d[r] = t.b[m][r];
					}
				}
			}
			for (; y < S; y++) {
				for (int r = 0; r < nx; r++) {
					uint8_t v = tile[(long)r * S + y];
					if (nchw) dst[c * oplane + (long)y * S + ox0 + r] = v;
					else dst[3L * ((long)y * S + ox0 + r) + c] = v;
				}
			}
		}
	}
}
