// A fake libcuda.so.1 for tests on machines without a GPU: host memory
// stands in for device memory, and every rule tsock relies on is checked
// (initialised first, a context current for memory calls). Environment:
// FAKECUDA_DEVICES (default 1), FAKECUDA_ALLOC_LIMIT (allocations before
// CUDA_ERROR_OUT_OF_MEMORY; default none), FAKECUDA_REGISTER_FAILS (1:
// cuMemHostRegister fails). Build with -DNO_IPC for a driver that lacks
// cuIpcGetMemHandle, -DNO_HOST for one without host memory calls.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long devptr;
enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, INVALID_DEVICE = 101, INVALID_CONTEXT = 201 };
#define TOTAL (1ull << 32)

static int inited, allocs, depth;
static void *current;
static unsigned long long live;

static int env(const char *name, int def) {
	const char *v = getenv(name);
	return v ? atoi(v) : def;
}
static int devices(void) { return env("FAKECUDA_DEVICES", 1); }

CUresult cuInit(unsigned flags) { inited = 1; return flags ? INVALID_VALUE : OK; }
#ifndef NO_VERSION
CUresult cuDriverGetVersion(int *v) { *v = 12040; return OK; }
#endif
CUresult cuDeviceGetCount(int *n) {
	if (!inited) return NOT_INITIALIZED;
	*n = devices();
	return OK;
}
CUresult cuDeviceGet(int *dev, int ordinal) {
	if (!inited) return NOT_INITIALIZED;
	if (ordinal < 0 || ordinal >= devices()) return INVALID_DEVICE;
	*dev = ordinal;
	return OK;
}
CUresult cuDeviceGetUuid(unsigned char uuid[16], int dev) {
	for (int i = 0; i < 16; i++) uuid[i] = (unsigned char)(0x10 * (dev + 1) + i);
	return OK;
}
CUresult cuDeviceGetName(char *name, int len, int dev) {
	snprintf(name, len, "Fake GPU %d", dev);
	return OK;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
	if (!inited) return NOT_INITIALIZED;
	*ctx = (void *)(long)(0x1000 + dev);
	return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { return OK; }
CUresult cuCtxPushCurrent_v2(void *ctx) {
	if (!ctx) return INVALID_CONTEXT;
	current = ctx;
	depth++;
	return OK;
}
CUresult cuCtxPopCurrent_v2(void **ctx) {
	if (depth == 0) return INVALID_CONTEXT;
	*ctx = current;
	current = --depth ? current : NULL;
	return OK;
}
CUresult cuCtxSynchronize(void) { return current ? OK : INVALID_CONTEXT; }

CUresult cuMemAlloc_v2(devptr *p, size_t n) {
	if (!current) return INVALID_CONTEXT;
	int limit = env("FAKECUDA_ALLOC_LIMIT", -1);
	if (n == 0) return INVALID_VALUE;
	if (limit >= 0 && allocs >= limit) return OUT_OF_MEMORY;
	size_t *block = malloc(n + 16);
	if (!block) return OUT_OF_MEMORY;
	block[0] = n;
	allocs++;
	live += n;
	*p = (devptr)(block + 2);
	return OK;
}
CUresult cuMemFree_v2(devptr p) {
	if (!current) return INVALID_CONTEXT;
	size_t *block = (size_t *)p - 2;
	live -= block[0];
	allocs--;
	free(block);
	return OK;
}
CUresult cuMemcpyHtoD_v2(devptr dst, const void *src, size_t n) {
	if (!current) return INVALID_CONTEXT;
	memcpy((void *)dst, src, n);
	return OK;
}
CUresult cuMemcpyDtoH_v2(void *dst, devptr src, size_t n) {
	if (!current) return INVALID_CONTEXT;
	memcpy(dst, (void *)src, n);
	return OK;
}
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
	if (!current) return INVALID_CONTEXT;
	*total = TOTAL;
	*free_bytes = TOTAL - live;
	return OK;
}
#ifndef NO_IPC
CUresult cuIpcGetMemHandle(unsigned char handle[64], devptr p) {
	if (!current) return INVALID_CONTEXT;
	memset(handle, 0, 64);
	memcpy(handle, "fakeipc", 7);
	memcpy(handle + 8, &p, sizeof p);
	return OK;
}
#endif
#ifndef NO_HOST
// Page-locked host memory and asynchronous copies (-DNO_HOST: a driver
// without them). Unregistering what was never registered is refused.
static int registered, streams, events;
CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
	if (!current) return INVALID_CONTEXT;
	if (n == 0) return INVALID_VALUE;
	*p = malloc(n);
	return *p ? OK : OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void *p) {
	if (!current) return INVALID_CONTEXT;
	free(p);
	return OK;
}
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
	if (!current) return INVALID_CONTEXT;
	if (env("FAKECUDA_REGISTER_FAILS", 0)) return 801; // as where the memory cannot be pinned
	// Older drivers take only whole pages; the fake is as strict.
	if (!p || n == 0 || ((unsigned long)p | n) & 4095 || (flags & ~0x0fu)) return INVALID_VALUE;
	registered++;
	return OK;
}
CUresult cuMemHostUnregister(void *p) {
	if (!current) return INVALID_CONTEXT;
	if (registered == 0) return INVALID_VALUE;
	registered--;
	return OK;
}
CUresult cuStreamCreate(void **s, unsigned flags) {
	if (!current) return INVALID_CONTEXT;
	streams++;
	*s = (void *)(long)(0x2000 + streams);
	return OK;
}
CUresult cuStreamDestroy_v2(void *s) { streams--; return OK; }
CUresult cuStreamSynchronize(void *s) { return current ? OK : INVALID_CONTEXT; }
CUresult cuEventCreate(void **e, unsigned flags) {
	if (!current) return INVALID_CONTEXT;
	events++;
	*e = (void *)(long)(0x3000 + events);
	return OK;
}
CUresult cuEventDestroy_v2(void *e) { events--; return OK; }
CUresult cuEventRecord(void *e, void *s) { return current ? OK : INVALID_CONTEXT; }
CUresult cuEventSynchronize(void *e) { return OK; }
CUresult cuMemcpyHtoDAsync_v2(devptr dst, const void *src, size_t n, void *s) {
	if (!current) return INVALID_CONTEXT;
	if (!s) return INVALID_VALUE;
	memcpy((void *)dst, src, n);
	return OK;
}
#endif
CUresult cuGetErrorName(CUresult r, const char **name) {
	switch (r) {
	case OK: *name = "CUDA_SUCCESS"; return OK;
	case INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; return OK;
	case OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
	case NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; return OK;
	case INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; return OK;
	case INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
	case 801: *name = "CUDA_ERROR_NOT_SUPPORTED"; return OK;
	}
	return INVALID_VALUE;
}
