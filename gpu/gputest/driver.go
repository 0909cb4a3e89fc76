// Package gputest holds fakes of the gpu package's driver for tests on
// machines without a GPU: an in-process Driver, and a fake libcuda.so.1
// (C, built with gcc) for the real dlopen binding.
package gputest

import (
	"fmt"
	"sync"

	"github.com/tsock/tsock/gpu"
)

// Driver is an in-process gpu.Driver: host memory stands in for the
// device's. It checks what the real driver would refuse.
type Driver struct {
	mu     sync.Mutex
	info   gpu.DeviceInfo
	next   uint64
	mem    map[uint64][]byte // allocation base → its bytes
	closed bool
	// AllocLimit fails allocations past this many with out-of-memory; < 0: none.
	AllocLimit int
}

// Total is the fake device's memory.
const Total = 1 << 34

// NewDriver returns a fake device 0.
func NewDriver() *Driver {
	return &Driver{info: gpu.DeviceInfo{UUID: FakeUUID(0), Name: "In-process fake GPU"},
		next: 1 << 40, mem: map[uint64][]byte{}, AllocLimit: -1}
}

var _ gpu.Driver = (*Driver)(nil)

func (d *Driver) Info() gpu.DeviceInfo { return d.info }

func (d *Driver) Alloc(n int64) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return 0, fmt.Errorf("fake cuMemAlloc: CUDA_ERROR_INVALID_CONTEXT (driver closed)")
	case n <= 0:
		return 0, fmt.Errorf("fake cuMemAlloc %d bytes: CUDA_ERROR_INVALID_VALUE", n)
	case d.AllocLimit >= 0 && len(d.mem) >= d.AllocLimit:
		return 0, fmt.Errorf("fake cuMemAlloc %d bytes: CUDA_ERROR_OUT_OF_MEMORY", n)
	}
	p := d.next
	d.next += uint64(n+4095) &^ 4095
	d.mem[p] = make([]byte, n)
	return p, nil
}

// span finds [ptr, ptr+n) inside one allocation. Callers hold d.mu.
func (d *Driver) span(ptr uint64, n int) ([]byte, error) {
	for base, b := range d.mem {
		if ptr >= base && ptr+uint64(n) <= base+uint64(len(b)) {
			return b[ptr-base : ptr-base+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("fake driver: %d bytes at %#x are not allocated: CUDA_ERROR_INVALID_VALUE", n, ptr)
}

func (d *Driver) Free(ptr uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.mem[ptr]; !ok {
		return fmt.Errorf("fake cuMemFree %#x: not an allocation: CUDA_ERROR_INVALID_VALUE", ptr)
	}
	delete(d.mem, ptr)
	return nil
}

func (d *Driver) CopyToDevice(dst uint64, src []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := d.span(dst, len(src))
	if err != nil {
		return err
	}
	copy(b, src)
	return nil
}

func (d *Driver) CopyToHost(dst []byte, src uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, err := d.span(src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, b)
	return nil
}

func (d *Driver) IPCHandle(ptr uint64) (gpu.IPCHandle, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var h gpu.IPCHandle
	if _, ok := d.mem[ptr]; !ok {
		return h, fmt.Errorf("fake cuIpcGetMemHandle %#x: not an allocation's base: CUDA_ERROR_INVALID_VALUE", ptr)
	}
	copy(h[:], fmt.Sprintf("fake:%x", ptr))
	return h, nil
}

func (d *Driver) MemInfo() (free, total int64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var used int64
	for _, b := range d.mem {
		used += int64(len(b))
	}
	return Total - used, Total, nil
}

func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("fake driver closed twice")
	}
	d.closed = true
	return nil
}

// Live is the number of allocations not freed.
func (d *Driver) Live() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.mem)
}
