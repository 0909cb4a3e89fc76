// The resampler's two passes, in C so that the compiler vectorises them.
#ifndef TSOCK_RESAMPLE_H
#define TSOCK_RESAMPLE_H
#include <stdint.h>

// Filter weights are fixed point with this many fraction bits.
#define TSOCK_PRECISION 14

// tsock_vertical filters n bytes from each of S groups of k source rows
// (rows first[y]..first[y]+k-1, starting at byte x0) into S rows of out.
void tsock_vertical(const uint8_t *src, long stride, long x0, int n, int S,
	const int32_t *first, const int32_t *w, int k, int32_t *acc, uint8_t *out);

// tsock_horizontal filters S rows of packed RGB (row bytes apart) to S
// pixels each, mirrored if flip, into dst as planar (nchw) or packed.
void tsock_horizontal(const uint8_t *in, long row, int S, const int32_t *first,
	const int32_t *w, int k, int flip, int nchw, uint8_t *dst);
#endif
