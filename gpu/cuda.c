// The CUDA driver API through dlopen (as Ollama does): the _v2 entry
// points, our own prototypes, a table filled once.
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "cuda.h"

typedef int CUresult;
typedef void *CUcontext;
typedef struct { unsigned char bytes[64]; } CUipcMemHandle;
typedef struct { unsigned char bytes[16]; } CUuuid;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGetCount)(int *);
static CUresult (*cuDeviceGet)(int *, int);
static CUresult (*cuDeviceGetUuid)(CUuuid *, int);
static CUresult (*cuDeviceGetName)(char *, int, int);
static CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, int);
static CUresult (*cuDevicePrimaryCtxRelease)(int);
static CUresult (*cuCtxPushCurrent)(CUcontext);
static CUresult (*cuCtxPopCurrent)(CUcontext *);
static CUresult (*cuCtxSynchronize)(void);
static CUresult (*cuMemAlloc)(tsock_devptr *, size_t);
static CUresult (*cuMemFree)(tsock_devptr);
static CUresult (*cuMemcpyHtoD)(tsock_devptr, const void *, size_t);
static CUresult (*cuMemcpyDtoH)(void *, tsock_devptr, size_t);
static CUresult (*cuMemGetInfo)(size_t *, size_t *);
static CUresult (*cuIpcGetMemHandle)(CUipcMemHandle *, tsock_devptr);
static CUresult (*cuGetErrorName)(CUresult, const char **);
static CUresult (*cuDriverGetVersion)(int *);
// Optional: host memory the DMA engine reads directly, and asynchronous
// copies. A driver without them still works (tsock copies from pageable
// memory); calls to them then return CUDA_ERROR_NOT_SUPPORTED.
static CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
static CUresult (*cuMemFreeHost)(void *);
static CUresult (*cuMemHostRegister)(void *, size_t, unsigned);
static CUresult (*cuMemHostUnregister)(void *);
static CUresult (*cuStreamCreate)(void **, unsigned);
static CUresult (*cuStreamDestroy)(void *);
static CUresult (*cuStreamSynchronize)(void *);
static CUresult (*cuEventCreate)(void **, unsigned);
static CUresult (*cuEventDestroy)(void *);
static CUresult (*cuEventRecord)(void *, void *);
static CUresult (*cuEventSynchronize)(void *);
static CUresult (*cuMemcpyHtoDAsync)(tsock_devptr, const void *, size_t, void *);
enum { NOT_SUPPORTED = 801, STREAM_NON_BLOCKING = 1, EVENT_DISABLE_TIMING = 2 };

int tsock_cuda_load(const char *lib, const char **missing) {
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) return 1;
#define SYM(var, name) if (!(*(void **)&var = dlsym(h, name))) { *missing = name; return 2; }
	SYM(cuInit, "cuInit");
	SYM(cuDeviceGetCount, "cuDeviceGetCount");
	SYM(cuDeviceGet, "cuDeviceGet");
	SYM(cuDeviceGetUuid, "cuDeviceGetUuid");
	SYM(cuDeviceGetName, "cuDeviceGetName");
	SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
	SYM(cuCtxPushCurrent, "cuCtxPushCurrent_v2");
	SYM(cuCtxPopCurrent, "cuCtxPopCurrent_v2");
	SYM(cuCtxSynchronize, "cuCtxSynchronize");
	SYM(cuMemAlloc, "cuMemAlloc_v2");
	SYM(cuMemFree, "cuMemFree_v2");
	SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2");
	SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2");
	SYM(cuMemGetInfo, "cuMemGetInfo_v2");
	SYM(cuIpcGetMemHandle, "cuIpcGetMemHandle");
	SYM(cuGetErrorName, "cuGetErrorName");
#undef SYM
#define OPT(var, name) *(void **)&var = dlsym(h, name);
	OPT(cuDriverGetVersion, "cuDriverGetVersion");
	OPT(cuMemHostAlloc, "cuMemHostAlloc");
	OPT(cuMemFreeHost, "cuMemFreeHost");
	OPT(cuMemHostRegister, "cuMemHostRegister_v2");
	OPT(cuMemHostUnregister, "cuMemHostUnregister");
	OPT(cuStreamCreate, "cuStreamCreate");
	OPT(cuStreamDestroy, "cuStreamDestroy_v2");
	OPT(cuStreamSynchronize, "cuStreamSynchronize");
	OPT(cuEventCreate, "cuEventCreate");
	OPT(cuEventDestroy, "cuEventDestroy_v2");
	OPT(cuEventRecord, "cuEventRecord");
	OPT(cuEventSynchronize, "cuEventSynchronize");
	OPT(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
#undef OPT
	return 0;
}

int tsock_cuda_init(void) { return cuInit(0); }
int tsock_cuda_driver_version(int *v) { return cuDriverGetVersion ? cuDriverGetVersion(v) : -1; }
int tsock_cuda_device_count(int *n) { return cuDeviceGetCount(n); }

int tsock_cuda_device(int ordinal, int *dev, unsigned char uuid[16], char *name, int name_len) {
	CUresult r = cuDeviceGet(dev, ordinal);
	CUuuid u;
	if (r == 0) r = cuDeviceGetUuid(&u, *dev);
	if (r == 0) {
		for (int i = 0; i < 16; i++) uuid[i] = u.bytes[i];
		r = cuDeviceGetName(name, name_len, *dev);
	}
	return r;
}

int tsock_cuda_open(int dev, void **ctx) { return cuDevicePrimaryCtxRetain((CUcontext *)ctx, dev); }
int tsock_cuda_close(int dev) { return cuDevicePrimaryCtxRelease(dev); }

// IN_CONTEXT runs call with ctx current on this thread, then restores the
// thread's context: Go may run the next call on another thread.
#define IN_CONTEXT(ctx, call)                  \
	do {                                       \
		CUresult r = cuCtxPushCurrent(ctx);    \
		if (r != 0) return r;                  \
		CUresult rc = (call);                  \
		CUcontext popped;                      \
		r = cuCtxPopCurrent(&popped);          \
		return rc != 0 ? rc : r;               \
	} while (0)

int tsock_cuda_alloc(void *ctx, tsock_devptr *ptr, size_t n) { IN_CONTEXT(ctx, cuMemAlloc(ptr, n)); }
int tsock_cuda_free(void *ctx, tsock_devptr ptr) { IN_CONTEXT(ctx, cuMemFree(ptr)); }

// The copy is synchronous for pageable memory, but only with respect to
// the host: synchronize so that the bytes are on the device before any
// consumer is told where they are.
static CUresult copy_and_sync(tsock_devptr dst, const void *src, size_t n) {
	CUresult r = cuMemcpyHtoD(dst, src, n);
	return r != 0 ? r : cuCtxSynchronize();
}
int tsock_cuda_to_device(void *ctx, tsock_devptr dst, const void *src, size_t n) {
	IN_CONTEXT(ctx, copy_and_sync(dst, src, n));
}
int tsock_cuda_to_host(void *ctx, void *dst, tsock_devptr src, size_t n) { IN_CONTEXT(ctx, cuMemcpyDtoH(dst, src, n)); }
int tsock_cuda_ipc_handle(void *ctx, unsigned char handle[64], tsock_devptr ptr) {
	IN_CONTEXT(ctx, cuIpcGetMemHandle((CUipcMemHandle *)handle, ptr));
}
int tsock_cuda_mem_info(void *ctx, size_t *free, size_t *total) { IN_CONTEXT(ctx, cuMemGetInfo(free, total)); }

static int have_host(void) { return cuMemHostAlloc && cuMemFreeHost && cuMemHostRegister && cuMemHostUnregister; }
static int have_async(void) {
	return cuStreamCreate && cuStreamDestroy && cuStreamSynchronize && cuEventCreate && cuEventDestroy && cuEventRecord &&
	       cuEventSynchronize && cuMemcpyHtoDAsync;
}

static CUresult host_alloc(void **p, size_t n) { return have_host() ? cuMemHostAlloc(p, n, 0) : NOT_SUPPORTED; }
static CUresult host_free(void *p) { return have_host() ? cuMemFreeHost(p) : NOT_SUPPORTED; }
// Registration works on whole pages: a batch's data section starts
// inside its file's first page. Rounding out stays inside the mapping,
// which covers whole pages, and unregistering rounds the same way.
static uintptr_t page_start(const void *p) { return (uintptr_t)p & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1); }
static CUresult host_register(void *p, size_t n, unsigned flags) {
	if (!have_host()) return NOT_SUPPORTED;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = page_start(p);
	uintptr_t end = ((uintptr_t)p + n + page - 1) & ~(page - 1);
	return cuMemHostRegister((void *)start, end - start, flags);
}
static CUresult host_unregister(void *p) { return have_host() ? cuMemHostUnregister((void *)page_start(p)) : NOT_SUPPORTED; }
int tsock_cuda_host_alloc(void *ctx, void **p, size_t n) { IN_CONTEXT(ctx, host_alloc(p, n)); }
int tsock_cuda_host_free(void *ctx, void *p) { IN_CONTEXT(ctx, host_free(p)); }
int tsock_cuda_host_register(void *ctx, void *p, size_t n, unsigned flags) { IN_CONTEXT(ctx, host_register(p, n, flags)); }
int tsock_cuda_host_unregister(void *ctx, void *p) { IN_CONTEXT(ctx, host_unregister(p)); }

static CUresult stager_free(tsock_stager *s) {
	CUresult r = 0, e;
	for (int k = 0; k < 2; k++) {
		if (s->event[k] && (e = cuEventDestroy(s->event[k])) && !r) r = e;
		if (s->stage[k] && (e = cuMemFreeHost(s->stage[k])) && !r) r = e;
		s->event[k] = s->stage[k] = 0;
	}
	if (s->stream && (e = cuStreamDestroy(s->stream)) && !r) r = e;
	s->stream = 0;
	return r;
}

static CUresult stager_new(tsock_stager *s, size_t chunk) {
	if (!have_host() || !have_async()) return NOT_SUPPORTED;
	memset(s, 0, sizeof *s);
	s->chunk = chunk;
	CUresult r = cuStreamCreate(&s->stream, STREAM_NON_BLOCKING);
	for (int k = 0; k < 2 && r == 0; k++) {
		r = cuMemHostAlloc(&s->stage[k], chunk, 0);
		if (r == 0) r = cuEventCreate(&s->event[k], EVENT_DISABLE_TIMING);
	}
	if (r != 0) stager_free(s);
	return r;
}

// stager_copy: the host copy of chunk i+1 into one pinned buffer runs
// while the DMA engine reads chunk i out of the other; an event per buffer
// says when the engine is done with it. It returns once every byte is on
// the device, and never with a DMA still reading a buffer (even on error).
static CUresult stager_copy(tsock_stager *s, tsock_devptr dst, const char *src, size_t n) {
	CUresult r = 0;
	int used[2] = {0, 0};
	size_t i = 0;
	for (size_t off = 0; off < n && r == 0; off += s->chunk, i++) {
		int k = i & 1;
		size_t len = n - off < s->chunk ? n - off : s->chunk;
		if (used[k] && (r = cuEventSynchronize(s->event[k])) != 0) break;
		memcpy(s->stage[k], src + off, len);
		r = cuMemcpyHtoDAsync(dst + off, s->stage[k], len, s->stream);
		if (r == 0) r = cuEventRecord(s->event[k], s->stream);
		used[k] = 1;
	}
	CUresult done = cuStreamSynchronize(s->stream);
	return r != 0 ? r : done;
}

int tsock_cuda_stager_new(void *ctx, tsock_stager *s, size_t chunk) { IN_CONTEXT(ctx, stager_new(s, chunk)); }
int tsock_cuda_stager_free(void *ctx, tsock_stager *s) { IN_CONTEXT(ctx, stager_free(s)); }
int tsock_cuda_stager_copy(void *ctx, tsock_stager *s, tsock_devptr dst, const void *src, size_t n) {
	IN_CONTEXT(ctx, stager_copy(s, dst, src, n));
}

const char *tsock_cuda_error_name(int result) {
	const char *name = 0;
	if (!cuGetErrorName || cuGetErrorName(result, &name) != 0 || !name) return "CUDA_ERROR_UNKNOWN";
	return name;
}
