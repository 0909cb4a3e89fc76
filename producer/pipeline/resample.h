// The resampler's two passes, in C so that the compiler vectorises them.
#ifndef TSOCK_RESAMPLE_H
#define TSOCK_RESAMPLE_H
#include <stdint.h>

// Filter weights are fixed point with this many fraction bits.
#define TSOCK_PRECISION 14

// tsock_vertical_t filters W packed RGB pixels from each of S groups of k
// source rows (rows first[y]..first[y]+k-1, from byte x0 on) and stores
// the S rows transposed and planar: out[c·W·S + x·S + y]. acc holds 3·W
// values, rows 16·3·W bytes.
void tsock_vertical_t(const uint8_t *src, long stride, long x0, int W, int S,
	const int32_t *first, const int32_t *w, int k, int32_t *acc, uint8_t *rows, uint8_t *out);

// tsock_horizontal_t filters tsock_vertical_t's planes along x to S
// pixels per row, mirrored if flip, into dst as planar (nchw) or packed
// RGB; acc holds S values, tile 16·S bytes.
void tsock_horizontal_t(const uint8_t *in, int W, int S, const int32_t *first,
	const int32_t *w, int k, int flip, int nchw, int32_t *acc, uint8_t *tile, uint8_t *dst);
#endif
