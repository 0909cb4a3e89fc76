package gpu

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoDriver: no usable CUDA driver (library or symbol missing, or no
// device). Host mode does not need one.
var ErrNoDriver = errors.New("no CUDA driver")

// DeviceInfo names the device a Driver works on.
type DeviceInfo struct {
	Ordinal int    // the driver's index of the device in this process
	UUID    string // "GPU-…": the same in every process, unlike the ordinal
	Name    string
}

// IPCHandle is a CUDA IPC memory handle: another process on the same
// physical GPU opens it (once) to map the allocation.
type IPCHandle [64]byte

// String is the handle in hex, as control files show it.
func (h IPCHandle) String() string { return hex.EncodeToString(h[:]) }

// Driver is the part of the CUDA driver API tsock uses, on one device.
// Implementations make the device's context current inside each call.
type Driver interface {
	Info() DeviceInfo
	// Alloc allocates n bytes with cuMemAlloc: plain memory, the only
	// kind an IPC handle can export.
	Alloc(n int64) (uint64, error)
	Free(ptr uint64) error
	// CopyToDevice returns once the bytes are on the device.
	CopyToDevice(dst uint64, src []byte) error
	CopyToHost(dst []byte, src uint64) error
	// IPCHandle exports the allocation whose base is ptr.
	IPCHandle(ptr uint64) (IPCHandle, error)
	// MemInfo is the device's free and total memory.
	MemInfo() (free, total int64, err error)
	Close() error
}

// DeviceSpec is a --device value: an ordinal or a UUID.
type DeviceSpec struct {
	Ordinal int    // with UUID == ""
	UUID    string // "GPU-…"
}

// ParseDevice parses "cuda:N" or "GPU-<uuid>".
func ParseDevice(s string) (DeviceSpec, error) {
	if rest, ok := strings.CutPrefix(s, "cuda:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 {
			return DeviceSpec{}, fmt.Errorf("device %q: want cuda:N with N ≥ 0", s)
		}
		return DeviceSpec{Ordinal: n}, nil
	}
	if strings.HasPrefix(s, "GPU-") && len(s) > 4 {
		return DeviceSpec{UUID: s}, nil
	}
	return DeviceSpec{}, fmt.Errorf("device %q: want cuda:N or GPU-<uuid>", s)
}

// FormatUUID renders 16 bytes as NVIDIA does: GPU-8-4-4-4-12 hex digits.
func FormatUUID(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return fmt.Sprintf("GPU-%s-%s-%s-%s-%s", h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
}

// HostMemory is host memory the DMA engine reads directly. Copies from
// pageable memory (what batch files are) go through the driver's own
// staging; these let tsock measure and choose. The real binding implements
// it; on a driver without the entry points each call fails.
type HostMemory interface {
	// AllocHost allocates n bytes of page-locked host memory.
	AllocHost(n int) ([]byte, error)
	FreeHost(b []byte) error
	// RegisterHost page-locks existing memory (readOnly for a read-only
	// mapping) until UnregisterHost.
	RegisterHost(b []byte, readOnly bool) error
	UnregisterHost(b []byte) error
	// NewStager makes a Stager with two page-locked buffers of chunk bytes.
	NewStager(chunk int) (Stager, error)
}

// Stager copies pageable memory to the device through its own page-locked
// buffers, the host copy of one chunk overlapping the DMA of the last.
// One copy at a time.
type Stager interface {
	// CopyToDevice returns once the bytes are on the device.
	CopyToDevice(dst uint64, src []byte) error
	Close() error
}
