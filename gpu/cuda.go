package gpu

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// DefaultLibrary is the CUDA driver library's name.
const DefaultLibrary = "libcuda.so.1"

// loadMu guards the C side's table of entry points.
var loadMu sync.Mutex

// cudaError is a failed driver call, named as CUDA names it.
func cudaError(what string, r C.int) error {
	return fmt.Errorf("%s: %s (%d)", what, C.GoString(C.tsock_cuda_error_name(r)), int(r))
}

// cuda is a Driver over the real driver API (or any library with its ABI).
type cuda struct {
	info DeviceInfo
	dev  C.int
	ctx  unsafe.Pointer
}

// DriverVersion loads lib (DefaultLibrary if empty) and says which CUDA
// version its driver supports ("12.4"), touching no device.
func DriverVersion(lib string) (string, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if err := load(lib); err != nil {
		return "", err
	}
	var v C.int
	switch r := C.tsock_cuda_driver_version(&v); r {
	case 0:
		return fmt.Sprintf("%d.%d", v/1000, v%1000/10), nil
	case -1:
		return "", fmt.Errorf("%w: the library lacks cuDriverGetVersion", ErrNoDriver)
	default:
		return "", fmt.Errorf("%w: %w", ErrNoDriver, cudaError("cuDriverGetVersion", r))
	}
}

// load opens lib (DefaultLibrary if empty) and resolves tsock's calls.
// Callers hold loadMu.
func load(lib string) error {
	if lib == "" {
		lib = DefaultLibrary
	}
	clib := C.CString(lib)
	defer C.free(unsafe.Pointer(clib))
	var missing *C.char
	switch C.tsock_cuda_load(clib, &missing) {
	case 1:
		return fmt.Errorf("%w: %s not found (no NVIDIA driver installed?)", ErrNoDriver, lib)
	case 2:
		return fmt.Errorf("%w: %s lacks %s (driver too old?)", ErrNoDriver, lib, C.GoString(missing))
	}
	return nil
}

// OpenCUDA loads lib (DefaultLibrary if empty), initialises the driver and
// retains spec's device's primary context.
func OpenCUDA(lib string, spec DeviceSpec) (Driver, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if err := load(lib); err != nil {
		return nil, err
	}
	if r := C.tsock_cuda_init(); r != 0 {
		return nil, fmt.Errorf("%w: %w", ErrNoDriver, cudaError("cuInit", r))
	}
	var count C.int
	if r := C.tsock_cuda_device_count(&count); r != 0 {
		return nil, cudaError("cuDeviceGetCount", r)
	}
	for i := 0; i < int(count); i++ {
		c, err := describe(i)
		if err != nil {
			return nil, err
		}
		if (spec.UUID == "" && spec.Ordinal == i) || spec.UUID == c.info.UUID {
			if r := C.tsock_cuda_open(c.dev, &c.ctx); r != 0 {
				return nil, cudaError("cuDevicePrimaryCtxRetain", r)
			}
			return c, nil
		}
	}
	if spec.UUID != "" {
		return nil, fmt.Errorf("%w: no device %s among %d", ErrNoDriver, spec.UUID, count)
	}
	return nil, fmt.Errorf("%w: no device cuda:%d (%d devices)", ErrNoDriver, spec.Ordinal, count)
}

func describe(ordinal int) (*cuda, error) {
	var dev C.int
	var uuid [16]byte
	var name [256]C.char
	if r := C.tsock_cuda_device(C.int(ordinal), &dev, (*C.uchar)(&uuid[0]), &name[0], C.int(len(name))); r != 0 {
		return nil, cudaError(fmt.Sprintf("describe device %d", ordinal), r)
	}
	return &cuda{dev: dev, info: DeviceInfo{Ordinal: ordinal, UUID: FormatUUID(uuid), Name: C.GoString(&name[0])}}, nil
}

func (c *cuda) Info() DeviceInfo { return c.info }

func (c *cuda) Alloc(n int64) (uint64, error) {
	var p C.tsock_devptr
	if r := C.tsock_cuda_alloc(c.ctx, &p, C.size_t(n)); r != 0 {
		return 0, cudaError(fmt.Sprintf("cuMemAlloc %d bytes", n), r)
	}
	return uint64(p), nil
}

func (c *cuda) Free(ptr uint64) error {
	if r := C.tsock_cuda_free(c.ctx, C.tsock_devptr(ptr)); r != 0 {
		return cudaError("cuMemFree", r)
	}
	return nil
}

func (c *cuda) CopyToDevice(dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if r := C.tsock_cuda_to_device(c.ctx, C.tsock_devptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src))); r != 0 {
		return cudaError(fmt.Sprintf("cuMemcpyHtoD %d bytes", len(src)), r)
	}
	return nil
}

func (c *cuda) CopyToHost(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	if r := C.tsock_cuda_to_host(c.ctx, unsafe.Pointer(&dst[0]), C.tsock_devptr(src), C.size_t(len(dst))); r != 0 {
		return cudaError(fmt.Sprintf("cuMemcpyDtoH %d bytes", len(dst)), r)
	}
	return nil
}

func (c *cuda) IPCHandle(ptr uint64) (IPCHandle, error) {
	var h IPCHandle
	if r := C.tsock_cuda_ipc_handle(c.ctx, (*C.uchar)(&h[0]), C.tsock_devptr(ptr)); r != 0 {
		return h, cudaError("cuIpcGetMemHandle", r)
	}
	return h, nil
}

func (c *cuda) MemInfo() (free, total int64, err error) {
	var f, t C.size_t
	if r := C.tsock_cuda_mem_info(c.ctx, &f, &t); r != 0 {
		return 0, 0, cudaError("cuMemGetInfo", r)
	}
	return int64(f), int64(t), nil
}

func (c *cuda) Close() error {
	if c.ctx == nil {
		return nil
	}
	c.ctx = nil
	if r := C.tsock_cuda_close(c.dev); r != 0 {
		return cudaError("cuDevicePrimaryCtxRelease", r)
	}
	return nil
}

var _ HostMemory = (*cuda)(nil)

// cuMemHostRegister flags.
const (
	hostRegisterReadOnly = 0x08
)

func (c *cuda) AllocHost(n int) ([]byte, error) {
	var p unsafe.Pointer
	if r := C.tsock_cuda_host_alloc(c.ctx, &p, C.size_t(n)); r != 0 {
		return nil, cudaError(fmt.Sprintf("cuMemHostAlloc %d bytes", n), r)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func (c *cuda) FreeHost(b []byte) error {
	if r := C.tsock_cuda_host_free(c.ctx, unsafe.Pointer(unsafe.SliceData(b))); r != 0 {
		return cudaError("cuMemFreeHost", r)
	}
	return nil
}

func (c *cuda) RegisterHost(b []byte, readOnly bool) error {
	var flags C.unsigned
	if readOnly {
		flags = hostRegisterReadOnly
	}
	if r := C.tsock_cuda_host_register(c.ctx, unsafe.Pointer(unsafe.SliceData(b)), C.size_t(len(b)), flags); r != 0 {
		return cudaError(fmt.Sprintf("cuMemHostRegister %d bytes", len(b)), r)
	}
	return nil
}

func (c *cuda) UnregisterHost(b []byte) error {
	if r := C.tsock_cuda_host_unregister(c.ctx, unsafe.Pointer(unsafe.SliceData(b))); r != 0 {
		return cudaError("cuMemHostUnregister", r)
	}
	return nil
}

// stager is a Stager on the C side's double buffer. Its C struct lives in
// C memory: the driver keeps the pinned buffers' addresses, which Go's
// collector must never see move.
type stager struct {
	c *cuda
	s *C.tsock_stager
}

func (c *cuda) NewStager(chunk int) (Stager, error) {
	s := (*C.tsock_stager)(C.calloc(1, C.size_t(unsafe.Sizeof(C.tsock_stager{}))))
	if r := C.tsock_cuda_stager_new(c.ctx, s, C.size_t(chunk)); r != 0 {
		C.free(unsafe.Pointer(s))
		return nil, cudaError(fmt.Sprintf("staging buffers of %d bytes", chunk), r)
	}
	return &stager{c: c, s: s}, nil
}

func (s *stager) CopyToDevice(dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if r := C.tsock_cuda_stager_copy(s.c.ctx, s.s, C.tsock_devptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src))); r != 0 {
		return cudaError(fmt.Sprintf("staged copy of %d bytes", len(src)), r)
	}
	return nil
}

func (s *stager) Close() error {
	if s.s == nil {
		return nil
	}
	r := C.tsock_cuda_stager_free(s.c.ctx, s.s)
	C.free(unsafe.Pointer(s.s))
	s.s = nil
	if r != 0 {
		return cudaError("free staging buffers", r)
	}
	return nil
}
