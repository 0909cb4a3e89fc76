package main

import (
	"context"
	_ "embed" // release
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/tsock/tsock/fs"
	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/producer/pipeline"
)

// version is stamped at build time (-ldflags "-X main.version=v1.2.3");
// unstamped, it is release, and the build's own record says which commit
// this is.
var version string

// release is the version of this tree: cmd/tsock/VERSION, which the
// Python client installs as its own version too.
//
//go:embed VERSION
var release string

// versionCommand is `tsock version` (and `tsock --version`): what this
// binary is and what this machine offers it, to paste into a bug report.
type versionCommand struct {
	stdout io.Writer
	flags  *pflag.FlagSet
	probe  machineProbe
}

// machineProbe finds out what the machine offers; tests replace parts.
type machineProbe struct {
	devFuse     string // the FUSE device
	cudaLibrary string // "" for gpu.DefaultLibrary
	nvml        gpu.NVML
}

func (c *versionCommand) Usage() string {
	return flagUsage("usage: tsock version\n\nPrints tsock's version and what this machine offers it (FUSE passthrough, libjpeg-turbo, CUDA, NVML).", c.flags)
}

func (c *versionCommand) Parse(args []string) error {
	c.flags = pflag.NewFlagSet("version", pflag.ContinueOnError)
	c.flags.SetOutput(io.Discard)
	if err := parseFlags(c.flags, args); err != nil {
		return err
	}
	if c.flags.NArg() != 0 {
		return usagef("version takes no arguments, got %q", c.flags.Args())
	}
	if c.probe.devFuse == "" {
		c.probe = machineProbe{devFuse: "/dev/fuse", nvml: gpu.NewNVML()}
	}
	return nil
}

func (c *versionCommand) Run(ctx context.Context) error {
	_, err := io.WriteString(c.stdout, versionReport(c.probe))
	return err
}

func (c *versionCommand) Close() error { return nil }

// versionReport is the report: "key: value" lines, one fact each.
func versionReport(p machineProbe) string {
	var b strings.Builder
	line := func(key, format string, args ...any) {
		fmt.Fprintf(&b, "%-14s %s\n", key+":", fmt.Sprintf(format, args...))
	}
	line("tsock", "%s", buildVersion())
	line("go", "%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	kernel, major, minor := fs.Kernel()
	root := os.Geteuid() == 0
	line("kernel", "Linux %s", kernel)
	line("user", "%s", map[bool]string{true: "root", false: fmt.Sprintf("uid %d (not root)", os.Geteuid())}[root])
	line("fuse device", "%s", fuseDevice(p.devFuse))
	line("fusermount3", "%s", lookPath("fusermount3"))
	line("passthrough", "%s", passthrough(major, minor, root))
	if err := pipeline.TurboAvailable(); err != nil {
		line("libjpeg-turbo", "not usable (%v): JPEGs decode with Go's image/jpeg, several times slower", err)
	} else {
		line("libjpeg-turbo", "libjpeg.so.62 loaded: region decode with DCT scaling")
	}
	if v, err := gpu.DriverVersion(p.cudaLibrary); err != nil {
		line("cuda driver", "not found (%v): --device needs it", err)
	} else {
		line("cuda driver", "found, CUDA %s", v)
	}
	line("nvml", "%s", nvmlReport(p.nvml))
	return b.String()
}

// buildVersion is the stamped version, else the module's version and the
// commit the build records.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	v := version
	if v == "" {
		v = strings.TrimSpace(release)
	}
	if v == "" {
		v = "(unknown)"
	}
	if !ok {
		return v
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		v += fmt.Sprintf(", commit %.12s", rev)
		if t := settings["vcs.time"]; t != "" {
			v += " of " + t
		}
		if settings["vcs.modified"] == "true" {
			v += ", with uncommitted changes"
		}
	}
	return v
}

// passthrough says whether FUSE passthrough (Linux 6.9+, as root) serves
// reads and mmaps without the daemon.
func passthrough(major, minor int, root bool) string {
	switch {
	case major < 6 || major == 6 && minor < 9:
		return "no: the kernel is older than 6.9; the daemon serves every read (slower)"
	case !root:
		return "no: it needs root (CAP_SYS_ADMIN); the daemon serves every read (slower)"
	}
	return "yes: reads and mmaps never enter the daemon"
}

// fuseDevice says whether the FUSE device can be opened.
func fuseDevice(path string) string {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Sprintf("not usable (%s: %v): nothing can mount", path, err)
	}
	unix.Close(fd)
	return "usable (" + path + ")"
}

// lookPath says where a program is, or that it is missing.
func lookPath(name string) string {
	if path, err := exec.LookPath(name); err == nil {
		return path
	}
	return "not found (mounting as root needs none; others need package fuse3)"
}

// nvmlReport says whether NVML answers and which GPUs it sees.
func nvmlReport(lib gpu.NVML) string {
	m := gpu.NewMonitor(lib)
	defer m.Close()
	if ok, why := m.Available(); !ok {
		return "not found (" + why + "): GPU telemetry is off"
	}
	devs, err := m.Devices()
	if err != nil {
		return "found, but listing GPUs failed: " + err.Error()
	}
	names := make([]string, len(devs))
	for i, d := range devs {
		names[i] = d.Name
	}
	return fmt.Sprintf("found, %d GPU(s): %s", len(devs), strings.Join(names, ", "))
}
