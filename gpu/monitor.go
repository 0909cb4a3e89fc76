package gpu

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/dustin/go-humanize"
)

// ErrNoNVML: GPU telemetry is not available (no driver, or NVML failed).
var ErrNoNVML = errors.New("NVML unavailable")

// Device is one GPU as NVML reports it.
type Device struct {
	Index                   int
	UUID, Name, PCIBusID    string
	MemoryTotal, MemoryUsed uint64
	UtilGPU, UtilMemory     uint32 // percent
	Processes               []Process
}

// Process is a process's use of a GPU.
type Process struct {
	PID        int
	UsedMemory uint64
}

// NVML is the part of NVML the monitor reads; NewNVML is the real one.
type NVML interface {
	Init() error
	Shutdown() error
	Devices() ([]Device, error)
}

// Monitor reads GPU telemetry. Calling NVML after a failed Init kills the
// process (go-nvml resolves symbols lazily), so the monitor is a state
// machine that calls NVML only while Init has succeeded and Close has not
// run.
type Monitor struct {
	mu     sync.Mutex
	lib    NVML
	ready  bool
	reason string // why not ready
}

// NewMonitor initialises lib once. A failure is a state, not an error:
// host mode needs no GPU.
func NewMonitor(lib NVML) *Monitor {
	m := &Monitor{lib: lib}
	if err := lib.Init(); err != nil {
		m.reason = err.Error()
		return m
	}
	m.ready = true
	return m
}

// Available says whether NVML answers, and why not.
func (m *Monitor) Available() (bool, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ready, m.reason
}

// Devices lists the GPUs.
func (m *Monitor) Devices() ([]Device, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready {
		return nil, fmt.Errorf("%w: %s", ErrNoNVML, m.reason)
	}
	return m.lib.Devices()
}

// Close shuts NVML down if, and only if, it was initialised.
func (m *Monitor) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ready {
		return nil
	}
	m.ready, m.reason = false, "closed"
	return m.lib.Shutdown()
}

// Text renders the devices one per line, for MOUNTPOINT/gpu/devices.
func (m *Monitor) Text() string {
	devs, err := m.Devices()
	if err != nil {
		return err.Error() + "\n"
	}
	var b strings.Builder
	for _, d := range devs {
		fmt.Fprintf(&b, "%d %s %q pci=%s memory=%s/%s util=%d%% memutil=%d%% processes=%d\n",
			d.Index, d.UUID, d.Name, d.PCIBusID, humanize.IBytes(d.MemoryUsed), humanize.IBytes(d.MemoryTotal),
			d.UtilGPU, d.UtilMemory, len(d.Processes))
	}
	if len(devs) == 0 {
		b.WriteString("no GPU\n")
	}
	return b.String()
}

// ProcessMemory is what NVML says process pid holds on the GPU with uuid;
// false when NVML does not say.
func (m *Monitor) ProcessMemory(uuid string, pid int) (uint64, bool) {
	devs, err := m.Devices()
	if err != nil {
		return 0, false
	}
	for _, d := range devs {
		if d.UUID != uuid {
			continue
		}
		for _, p := range d.Processes {
			if p.PID == pid {
				return p.UsedMemory, true
			}
		}
	}
	return 0, false
}
