package gpu_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tsock/tsock/gpu"
)

// fakeNVML fails the test on any call NVML would not survive.
type fakeNVML struct {
	t                   *testing.T
	initErr             error
	inited, shut, calls int
	devices             []gpu.Device
}

func (f *fakeNVML) Init() error {
	f.inited++
	return f.initErr
}

func (f *fakeNVML) alive(what string) {
	if f.initErr != nil || f.shut > 0 {
		f.t.Fatalf("%s called after a failed Init or after Shutdown: that kills the process", what)
	}
}

func (f *fakeNVML) Shutdown() error {
	f.alive("Shutdown")
	f.shut++
	return nil
}

func (f *fakeNVML) Devices() ([]gpu.Device, error) {
	f.alive("Devices")
	f.calls++
	return f.devices, nil
}

func TestMonitorNeverCallsNVMLAfterAFailedInit(t *testing.T) {
	f := &fakeNVML{t: t, initErr: errors.New("no NVIDIA driver (libnvidia-ml.so.1 not found)")}
	m := gpu.NewMonitor(f)
	if ok, why := m.Available(); ok || !strings.Contains(why, "no NVIDIA driver") {
		t.Fatalf("available %v: %q", ok, why)
	}
	if _, err := m.Devices(); !errors.Is(err, gpu.ErrNoNVML) {
		t.Fatalf("devices: %v", err)
	}
	if !strings.HasPrefix(m.Text(), "NVML unavailable: no NVIDIA driver") {
		t.Fatalf("text %q", m.Text())
	}
	if _, ok := m.ProcessMemory("GPU-x", 1); ok {
		t.Fatal("process memory without NVML")
	}
	if err := m.Close(); err != nil || f.inited != 1 {
		t.Fatalf("close: %v, %d inits", err, f.inited)
	}
}

func TestMonitorReadsDevicesAndShutsDownOnce(t *testing.T) {
	f := &fakeNVML{t: t, devices: []gpu.Device{{Index: 0, UUID: "GPU-a", Name: "Fake", PCIBusID: "0000:01:00.0",
		MemoryTotal: 16 << 30, MemoryUsed: 1 << 30, UtilGPU: 50, Processes: []gpu.Process{{PID: 42, UsedMemory: 300 << 20}}}}}
	m := gpu.NewMonitor(f)
	if ok, _ := m.Available(); !ok {
		t.Fatal("not available")
	}
	if text := m.Text(); text != "0 GPU-a \"Fake\" pci=0000:01:00.0 memory=1.0 GiB/16 GiB util=50% memutil=0% processes=1\n" {
		t.Fatalf("text %q", text)
	}
	if n, ok := m.ProcessMemory("GPU-a", 42); !ok || n != 300<<20 {
		t.Fatalf("process 42: %d %v", n, ok)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m.Close() // a second close must not reach NVML
	if _, err := m.Devices(); !errors.Is(err, gpu.ErrNoNVML) || f.shut != 1 {
		t.Fatalf("after close: %v, %d shutdowns", err, f.shut)
	}
}

// The real go-nvml on a machine without the driver: Init fails, and the
// process survives everything after (a stray NVML call would kill this
// test binary with "symbol lookup error").
func TestRealNVMLWithoutADriver(t *testing.T) {
	m := gpu.NewMonitor(gpu.NewNVML())
	ok, why := m.Available()
	if ok {
		t.Logf("NVML is available here (%s): nothing to check", m.Text())
		m.Close()
		return
	}
	if !strings.Contains(why, "no NVIDIA driver") {
		t.Fatalf("reason %q", why)
	}
	m.Text()
	m.ProcessMemory("GPU-x", 1)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}
