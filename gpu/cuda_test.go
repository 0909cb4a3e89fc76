package gpu_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/gpu/gputest"
)

// The real dlopen binding, driven through a fake libcuda.so built here.
func TestCUDABindingLifecycle(t *testing.T) {
	t.Setenv("FAKECUDA_DEVICES", "2")
	d, err := gpu.OpenCUDA(gputest.LibCUDA(t), gpu.DeviceSpec{Ordinal: 1})
	if err != nil {
		t.Fatal(err)
	}
	info := d.Info()
	if info.Ordinal != 1 || info.UUID != gputest.FakeUUID(1) || info.Name != "Fake GPU 1" {
		t.Fatalf("device %+v", info)
	}
	free0, total, err := d.MemInfo()
	if err != nil || free0 != total {
		t.Fatalf("mem info at start: %d free of %d, %v", free0, total, err)
	}
	p, err := d.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	src := bytes.Repeat([]byte("tsock!"), 1000)
	if err := d.CopyToDevice(p+100, src); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, len(src))
	if err := d.CopyToHost(back, p+100); err != nil || !bytes.Equal(back, src) {
		t.Fatalf("round trip through the device: %v", err)
	}
	h, err := d.IPCHandle(p)
	if err != nil || !strings.HasPrefix(h.String(), "66616b65697063") { // "fakeipc"
		t.Fatalf("handle %s, %v", h, err)
	}
	if free, _, _ := d.MemInfo(); free != free0-1<<20 {
		t.Fatalf("%d free after a 1 MiB allocation, want %d", free, free0-1<<20)
	}
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	if free, _, _ := d.MemInfo(); free != free0 {
		t.Fatalf("%d free after freeing, want %d: a leak", free, free0)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCUDADeviceByUUID(t *testing.T) {
	t.Setenv("FAKECUDA_DEVICES", "3")
	lib := gputest.LibCUDA(t)
	d, err := gpu.OpenCUDA(lib, gpu.DeviceSpec{UUID: gputest.FakeUUID(2)})
	if err != nil || d.Info().Ordinal != 2 {
		t.Fatalf("by UUID: %+v %v", d, err)
	}
	d.Close()
	for _, spec := range []gpu.DeviceSpec{{Ordinal: 3}, {UUID: "GPU-nope"}} {
		if _, err := gpu.OpenCUDA(lib, spec); !errors.Is(err, gpu.ErrNoDriver) {
			t.Errorf("%+v: %v, want ErrNoDriver", spec, err)
		}
	}
}

func TestCUDAErrorsAreNamed(t *testing.T) {
	t.Setenv("FAKECUDA_ALLOC_LIMIT", "1")
	d, err := gpu.OpenCUDA(gputest.LibCUDA(t), gpu.DeviceSpec{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := d.Alloc(10)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(p)
	if _, err := d.Alloc(10); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
		t.Fatalf("second allocation over the limit: %v", err)
	}
	if _, err := d.Alloc(0); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_VALUE") {
		t.Fatalf("zero-byte allocation: %v", err)
	}
}

func TestNoDriver(t *testing.T) {
	if _, err := gpu.OpenCUDA(filepath.Join(t.TempDir(), "libcuda.so.1"), gpu.DeviceSpec{}); !errors.Is(err, gpu.ErrNoDriver) ||
		!strings.Contains(err.Error(), "not found") {
		t.Fatalf("missing library: %v", err)
	}
	_, err := gpu.OpenCUDA(gputest.LibCUDA(t, "-DNO_IPC"), gpu.DeviceSpec{})
	if !errors.Is(err, gpu.ErrNoDriver) || !strings.Contains(err.Error(), "cuIpcGetMemHandle") {
		t.Fatalf("library without cuIpcGetMemHandle: %v", err)
	}
}

func TestParseDevice(t *testing.T) {
	for in, want := range map[string]gpu.DeviceSpec{"cuda:0": {}, "cuda:3": {Ordinal: 3}, "GPU-abc": {UUID: "GPU-abc"}} {
		if got, err := gpu.ParseDevice(in); err != nil || got != want {
			t.Errorf("%s: %+v %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "cuda:", "cuda:-1", "cuda:x", "gpu0", "GPU-"} {
		if _, err := gpu.ParseDevice(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Staged copies cut a batch into chunks: every size around the chunk's
// must arrive whole, and the pinned paths round-trip too.
func TestCUDAHostMemoryAndStaging(t *testing.T) {
	d, err := gpu.OpenCUDA(gputest.LibCUDA(t), gpu.DeviceSpec{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	host := d.(gpu.HostMemory)
	const chunk = 4096
	dev, err := d.Alloc(10 * chunk)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(dev)
	st, err := host.NewStager(chunk)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip := func(what string, copyIn func([]byte) error, src []byte) {
		t.Helper()
		if err := copyIn(src); err != nil {
			t.Fatalf("%s, %d bytes: %v", what, len(src), err)
		}
		back := make([]byte, len(src))
		if err := d.CopyToHost(back, dev); err != nil || !bytes.Equal(back, src) {
			t.Fatalf("%s, %d bytes: the device holds other bytes (%v)", what, len(src), err)
		}
	}
	for _, n := range []int{1, chunk - 1, chunk, chunk + 1, 2 * chunk, 5*chunk/2 + 3, 10 * chunk} {
		src := make([]byte, n)
		rand.NewChaCha8([32]byte{byte(n)}).Read(src) // no period: a misplaced chunk shows
		roundTrip("staged", func(b []byte) error { return st.CopyToDevice(dev, b) }, src)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	pinned, err := host.AllocHost(3 * chunk)
	if err != nil {
		t.Fatal(err)
	}
	copy(pinned, bytes.Repeat([]byte("pinned"), chunk))
	roundTrip("pinned", func(b []byte) error { return d.CopyToDevice(dev, b) }, pinned)
	if err := host.RegisterHost(pinned[:chunk], true); err != nil {
		t.Fatal(err)
	}
	if err := host.UnregisterHost(pinned[:chunk]); err != nil {
		t.Fatal(err)
	}
	if err := host.UnregisterHost(pinned[:chunk]); err == nil {
		t.Fatal("unregistering twice was accepted")
	}
	if err := host.FreeHost(pinned); err != nil {
		t.Fatal(err)
	}
}

// A driver without the optional entry points still opens; only the calls
// that need them fail, naming why.
func TestCUDAWithoutHostMemory(t *testing.T) {
	d, err := gpu.OpenCUDA(gputest.LibCUDA(t, "-DNO_HOST"), gpu.DeviceSpec{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	host := d.(gpu.HostMemory)
	if _, err := host.AllocHost(4096); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_NOT_SUPPORTED") {
		t.Fatalf("AllocHost without cuMemHostAlloc: %v", err)
	}
	if _, err := host.NewStager(4096); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_NOT_SUPPORTED") {
		t.Fatalf("NewStager without async copies: %v", err)
	}
}
