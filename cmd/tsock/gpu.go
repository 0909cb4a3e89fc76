package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/tsock/tsock/batchstore"
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
func (c *mountCommand) setUpGPU(hostBuffer int64) error {
	if c.device == "" {
		return nil
	}
	drv, err := openDriver(c.deviceSpec)
	if err != nil {
		return fmt.Errorf("--device %s: %w", c.device, err)
	}
	c.gpu = &gpuMode{driver: drv}
	size := hostBuffer
	if c.gpuBuffer > 0 {
		size = c.gpuBuffer
	}
	slab := c.cfg.BatchBytes() - batchfile.DataStart
	if c.ingestMode { // batch sizes are the producer's business
		slab = size / 8
		if c.gpuSlab > 0 {
			slab = c.gpuSlab
		}
	}
	if c.gpu.pool, err = gpu.NewPool(drv, size, slab); err != nil {
		return fmt.Errorf("--device %s: %w", c.device, err)
	}
	c.gpu.monitor = gpu.NewMonitor(gpu.NewNVML())
	c.cfg.GPU, c.ingestCfg.GPU = c.gpu.pool, c.gpu.pool
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

// status is the GPU part of MOUNTPOINT/status.
func (g *gpuMode) status(b *strings.Builder, consumers []batchstore.ConsumerSnapshot) {
	info := g.driver.Info()
	slabs := g.pool.Slabs()
	held := int64(len(slabs)) * slabs[0].Size
	fmt.Fprintf(b, "gpu: %s (%s, cuda:%d): %d slabs of %s = %s held by tsock, %d holding a batch",
		info.UUID, info.Name, info.Ordinal, len(slabs), humanize.IBytes(uint64(slabs[0].Size)),
		humanize.IBytes(uint64(held)), g.pool.InUse())
	if free, total, err := g.driver.MemInfo(); err == nil {
		fmt.Fprintf(b, "; device %s free of %s", humanize.IBytes(uint64(free)), humanize.IBytes(uint64(total)))
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "gpu upload: %s\n", g.pool.UploadPath())
	if ok, why := g.monitor.Available(); !ok {
		fmt.Fprintf(b, "gpu memory by consumer: unknown (%s)\n", why)
		return
	}
	b.WriteString("gpu memory by consumer (NVML):\n")
	for _, cs := range consumers {
		if pid, mem, ok := g.processMemory(cs); ok {
			fmt.Fprintf(b, "  %s: pid %d, %s\n", cs.Name, pid, humanize.IBytes(mem))
		} else {
			fmt.Fprintf(b, "  %s: none reported\n", cs.Name)
		}
	}
}

// processMemory is what NVML reports the process of cs's reader holds on
// tsock's GPU (NVML must be available).
func (g *gpuMode) processMemory(cs batchstore.ConsumerSnapshot) (pid int, mem uint64, ok bool) {
	pid = processOf(int(cs.Caller))
	mem, ok = g.monitor.ProcessMemory(g.driver.Info().UUID, pid)
	return pid, mem, ok
}

// doc is the GPU's part of status.json.
func (g *gpuMode) doc() *gpuDoc {
	info := g.driver.Info()
	slabs := g.pool.Slabs()
	return &gpuDoc{Name: info.Name, UUID: info.UUID, Slabs: len(slabs), SlabSize: slabs[0].Size, InUse: g.pool.InUse()}
}

// consumerMemory is what NVML reports cs's process holds on tsock's GPU,
// -1 if it cannot tell.
func (g *gpuMode) consumerMemory(cs batchstore.ConsumerSnapshot) int64 {
	if ok, _ := g.monitor.Available(); !ok {
		return -1
	}
	if _, mem, ok := g.processMemory(cs); ok {
		return int64(mem)
	}
	return 0
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
