// The C half of the CUDA binding: the driver API through dlopen, with
// tsock's own prototypes (no CUDA headers needed to build).
#ifndef TSOCK_CUDA_H
#define TSOCK_CUDA_H
#include <stddef.h>

typedef unsigned long long tsock_devptr;

// tsock_cuda_load opens lib and resolves every symbol tsock uses. It
// returns 0, 1 when the library is missing, 2 when a symbol is (named in
// *missing).
int tsock_cuda_load(const char *lib, const char **missing);

// Each call below returns a CUresult (0: success). Those after
// tsock_cuda_open run with the device's primary context made current for
// the call, and only for it.
int tsock_cuda_init(void);
// tsock_cuda_driver_version: the CUDA version the driver supports (1000 *
// major + 10 * minor); -1 where the library lacks the call. No cuInit needed.
int tsock_cuda_driver_version(int *v);
int tsock_cuda_device_count(int *n);
int tsock_cuda_device(int ordinal, int *dev, unsigned char uuid[16], char *name, int name_len);
int tsock_cuda_open(int dev, void **ctx);
int tsock_cuda_close(int dev);
int tsock_cuda_alloc(void *ctx, tsock_devptr *ptr, size_t n);
int tsock_cuda_free(void *ctx, tsock_devptr ptr);
int tsock_cuda_to_device(void *ctx, tsock_devptr dst, const void *src, size_t n);
int tsock_cuda_to_host(void *ctx, void *dst, tsock_devptr src, size_t n);
int tsock_cuda_ipc_handle(void *ctx, unsigned char handle[64], tsock_devptr ptr);
int tsock_cuda_mem_info(void *ctx, size_t *free, size_t *total);
const char *tsock_cuda_error_name(int result);

// Optional entry points (CUDA_ERROR_NOT_SUPPORTED where the driver lacks
// them): page-locked host memory, registration of existing host memory.
int tsock_cuda_host_alloc(void *ctx, void **p, size_t n);
int tsock_cuda_host_free(void *ctx, void *p);
int tsock_cuda_host_register(void *ctx, void *p, size_t n, unsigned flags);
int tsock_cuda_host_unregister(void *ctx, void *p);

// A stager copies pageable memory to the device through two page-locked
// buffers of chunk bytes on its own stream. One copy at a time per stager.
typedef struct {
	void *stage[2];
	void *event[2];
	void *stream;
	size_t chunk;
} tsock_stager;
int tsock_cuda_stager_new(void *ctx, tsock_stager *s, size_t chunk);
int tsock_cuda_stager_free(void *ctx, tsock_stager *s);
int tsock_cuda_stager_copy(void *ctx, tsock_stager *s, tsock_devptr dst, const void *src, size_t n);
#endif
