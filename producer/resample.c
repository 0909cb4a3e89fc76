#include "resample.h"

static inline uint8_t clamp8(int32_t v) {
	v = (v + (1 << (TSOCK_PRECISION - 1))) >> TSOCK_PRECISION;
	return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

// Clones for AVX2 where the CPU has it; SSE2 otherwise.
__attribute__((target_clones("avx2", "default")))
void tsock_vertical(const uint8_t *src, long stride, long x0, int n, int S,
	const int32_t *first, const int32_t *w, int k, int32_t *acc, uint8_t *out) {
	for (int y = 0; y < S; y++) {
		const int32_t *ws = w + (long)y * k;
		const uint8_t *in = src + (long)first[y] * stride + x0;
		int32_t w0 = ws[0];
		for (int i = 0; i < n; i++) acc[i] = w0 * in[i];
		for (int t = 1; t < k; t++) {
			const uint8_t *p = in + (long)t * stride;
			int32_t wt = ws[t];
			for (int i = 0; i < n; i++) acc[i] += wt * p[i];
		}
		uint8_t *o = out + (long)y * n;
		for (int i = 0; i < n; i++) o[i] = clamp8(acc[i]);
	}
}

// One output pixel of row r: k taps from pixel first on.
#define TAPS(K)                                                              \
	for (int x = 0; x < S; x++) {                                            \
		const uint8_t *p = r + 3 * first[x];                                 \
		const int32_t *ws = w + (long)x * (K);                               \
		int32_t sr = 0, sg = 0, sb = 0;                                      \
		for (int t = 0; t < (K); t++) {                                      \
			sr += ws[t] * p[3 * t];                                          \
			sg += ws[t] * p[3 * t + 1];                                      \
			sb += ws[t] * p[3 * t + 2];                                      \
		}                                                                    \
		int ox = flip ? S - 1 - x : x;                                       \
		if (nchw) {                                                          \
			dr[ox] = clamp8(sr), dg[ox] = clamp8(sg), db[ox] = clamp8(sb);   \
		} else {                                                             \
			dr[3 * ox] = clamp8(sr), dr[3 * ox + 1] = clamp8(sg), dr[3 * ox + 2] = clamp8(sb); \
		}                                                                    \
	}

void tsock_horizontal(const uint8_t *in, long row, int S, const int32_t *first,
	const int32_t *w, int k, int flip, int nchw, uint8_t *dst) {
	long plane = (long)S * S;
	for (int y = 0; y < S; y++) {
		const uint8_t *r = in + (long)y * row;
		uint8_t *dr, *dg = 0, *db = 0;
		if (nchw) {
			dr = dst + (long)y * S, dg = dr + plane, db = dg + plane;
		} else {
			dr = dst + 3L * y * S;
		}
		// Constant tap counts unroll: the common ones get their own loop.
		switch (k) {
		case 2: TAPS(2) break;
		case 3: TAPS(3) break;
		case 4: TAPS(4) break;
		default: TAPS(k) break;
		}
	}
}
