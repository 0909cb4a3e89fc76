package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/gpu"
)

// gpuMode is the mount's GPU side (--device): the driver, the slabs every
// batch is copied into, and NVML telemetry.
type gpuMode struct {
	driver  gpu.Driver
	pool    *gpu.Pool
	monitor *gpu.Monitor
}

// openDriver opens the CUDA driver: libcuda.so.1, or the library named by
// TSOCK_LIBCUDA (how tests load a fake one). In-process tests replace it.
var openDriver = func(spec gpu.DeviceSpec) (gpu.Driver, error) {
	return gpu.OpenCUDA(os.Getenv("TSOCK_LIBCUDA"), spec)
}

// setUpGPU opens the device and allocates the slabs, once, before the
// producer starts: a mount that cannot have its GPU fails at start.
func (d *daemon) setUpGPU(hostBuffer int64) error {
	if d.device == "" {
		return nil
	}
	drv, err := openDriver(d.deviceSpec)
	if err != nil {
		return fmt.Errorf("--device %s: %w", d.device, err)
	}
	d.gpu = &gpuMode{driver: drv}
	size := hostBuffer
	if d.gpuBuffer > 0 {
		size = d.gpuBuffer
	}
	slab := d.cfg.BatchBytes() - batchfile.DataStart
	if d.ingestMode { // batch sizes are the producer's business
		slab = size / 8
		if d.gpuSlab > 0 {
			slab = d.gpuSlab
		}
	}
	if d.gpu.pool, err = gpu.NewPool(drv, size, slab); err != nil {
		return fmt.Errorf("--device %s: %w", d.device, err)
	}
	d.gpu.monitor = gpu.NewMonitor(gpu.NewNVML())
	d.cfg.GPU, d.ingestCfg.GPU = d.gpu.pool, d.gpu.pool
	return nil
}

// slabs is how many batches the GPU holds at once; 0 without --device.
func (g *gpuMode) slabs() int {
	if g == nil {
		return 0
	}
	return len(g.pool.Slabs())
}

// files are MOUNTPOINT/gpu/devices and MOUNTPOINT/gpu/slabs. Every slab
// line names the same handle (one allocation) and the slab's offset in it.
func (g *gpuMode) files() map[string]func() ([]byte, error) {
	return map[string]func() ([]byte, error){
		"devices": func() ([]byte, error) { return []byte(g.monitor.Text()), nil },
		"slabs": func() ([]byte, error) {
			var b strings.Builder
			uuid := g.driver.Info().UUID
			for _, s := range g.pool.Slabs() {
				fmt.Fprintf(&b, "%d %s %d %s %d\n", s.ID, s.Handle, s.Size, uuid, s.Offset)
			}
			return []byte(b.String()), nil
		},
	}
}

// processOf is the process of thread tid (FUSE names threads; NVML processes).
func processOf(tid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return tid
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			var pid int
			if _, err := fmt.Sscan(v, &pid); err == nil {
				return pid
			}
		}
	}
	return tid
}

// Close frees the slabs and lets go of the device and NVML.
func (g *gpuMode) Close() error {
	var errs []error
	if g.pool != nil {
		errs = append(errs, g.pool.Close())
	}
	if g.monitor != nil {
		errs = append(errs, g.monitor.Close())
	}
	errs = append(errs, g.driver.Close())
	return errors.Join(errs...)
}
