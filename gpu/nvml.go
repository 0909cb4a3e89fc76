package gpu

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// realNVML is NVML through go-nvml (pinned at v0.13.3-0, which the module
// proxy serves). It dlopens libnvidia-ml.so.1 at Init.
type realNVML struct{}

// NewNVML returns the system's NVML.
func NewNVML() NVML { return realNVML{} }

func (realNVML) Init() error {
	switch r := nvml.Init(); r {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return errors.New("no NVIDIA driver (libnvidia-ml.so.1 not found)")
	default:
		return fmt.Errorf("nvmlInit: %v", r)
	}
}

func (realNVML) Shutdown() error {
	if r := nvml.Shutdown(); r != nvml.SUCCESS {
		return fmt.Errorf("nvmlShutdown: %v", r)
	}
	return nil
}

func (realNVML) Devices() ([]Device, error) {
	n, r := nvml.DeviceGetCount()
	if r != nvml.SUCCESS {
		return nil, fmt.Errorf("nvmlDeviceGetCount: %v", r)
	}
	devs := make([]Device, 0, n)
	for i := range n {
		h, r := nvml.DeviceGetHandleByIndex(i)
		if r != nvml.SUCCESS {
			return nil, fmt.Errorf("nvmlDeviceGetHandleByIndex(%d): %v", i, r)
		}
		d := Device{Index: i}
		d.UUID, _ = h.GetUUID()
		d.Name, _ = h.GetName()
		if pci, r := h.GetPciInfo(); r == nvml.SUCCESS {
			d.PCIBusID = cString(pci.BusId[:])
		}
		if mem, r := h.GetMemoryInfo(); r == nvml.SUCCESS {
			d.MemoryTotal, d.MemoryUsed = mem.Total, mem.Used
		}
		if u, r := h.GetUtilizationRates(); r == nvml.SUCCESS {
			d.UtilGPU, d.UtilMemory = u.Gpu, u.Memory
		}
		if procs, r := h.GetComputeRunningProcesses(); r == nvml.SUCCESS {
			for _, p := range procs {
				d.Processes = append(d.Processes, Process{PID: int(p.Pid), UsedMemory: p.UsedGpuMemory})
			}
		}
		devs = append(devs, d)
	}
	return devs, nil
}

func cString(b []int8) string {
	s := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}
