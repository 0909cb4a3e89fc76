// The CUDA driver API through dlopen (as Ollama does): the _v2 entry
// points, our own prototypes, a table filled once.
#include <dlfcn.h>
#include <stddef.h>

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
	return 0;
}

int tsock_cuda_init(void) { return cuInit(0); }
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

const char *tsock_cuda_error_name(int result) {
	const char *name = 0;
	if (!cuGetErrorName || cuGetErrorName(result, &name) != 0 || !name) return "CUDA_ERROR_UNKNOWN";
	return name;
}
