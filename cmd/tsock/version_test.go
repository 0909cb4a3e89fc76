package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/gpu/gputest"
)

// fakeNVML is an NVML that answers with one GPU, or fails Init.
type fakeNVML struct{ initErr error }

func (f fakeNVML) Init() error     { return f.initErr }
func (f fakeNVML) Shutdown() error { return nil }
func (f fakeNVML) Devices() ([]gpu.Device, error) {
	return []gpu.Device{{Name: "Fake H100"}}, nil
}

// reportLines maps each "key: value" line of a version report.
func reportLines(t *testing.T, report string) map[string]string {
	t.Helper()
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(report, "\n"), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			t.Fatalf("line %q is not key: value", l)
		}
		lines[k] = strings.TrimSpace(v)
	}
	return lines
}

func TestVersionSaysWhatTheMachineOffers(t *testing.T) {
	out, errOut, code := tsockRun(context.Background(), "version")
	if code != exitOK {
		t.Fatalf("tsock version: exit %d: %s", code, errOut)
	}
	if again, _, code := tsockRun(context.Background(), "--version"); code != exitOK || again != out {
		t.Fatalf("tsock --version: exit %d, %q; want tsock version's %q", code, again, out)
	}
	lines := reportLines(t, out)
	for _, key := range []string{"tsock", "go", "kernel", "user", "fuse device", "fusermount3", "passthrough", "libjpeg-turbo", "cuda driver", "nvml"} {
		if lines[key] == "" {
			t.Errorf("no %q line in:\n%s", key, out)
		}
	}
	// This machine (CI's too): root, /dev/fuse, Linux 6.9+, libjpeg-turbo, no GPU.
	for key, want := range map[string]string{
		"user": "root", "fuse device": "usable (/dev/fuse)", "passthrough": "yes", "libjpeg-turbo": "libjpeg.so.62 loaded",
		"go": "go1.",
	} {
		if !strings.HasPrefix(lines[key], want) {
			t.Errorf("%s: %q, want it to start with %q", key, lines[key], want)
		}
	}
	if _, _, code := tsockRun(context.Background(), "version", "extra"); code != exitUsage {
		t.Errorf("tsock version extra: exit %d, want %d", code, exitUsage)
	}
}

func TestVersionReportsEachProbe(t *testing.T) {
	lines := reportLines(t, versionReport(machineProbe{
		devFuse: t.TempDir() + "/no-fuse", cudaLibrary: gputest.LibCUDA(t), nvml: fakeNVML{},
	}))
	for key, want := range map[string]string{
		"fuse device": "not usable", "cuda driver": "found, CUDA 12.4", "nvml": "found, 1 GPU(s): Fake H100",
	} {
		if !strings.HasPrefix(lines[key], want) {
			t.Errorf("%s: %q, want it to start with %q", key, lines[key], want)
		}
	}
	lines = reportLines(t, versionReport(machineProbe{
		devFuse: "/dev/fuse", cudaLibrary: t.TempDir() + "/libcuda.so.1", nvml: fakeNVML{initErr: errors.New("no NVIDIA driver")},
	}))
	for key, want := range map[string]string{"cuda driver": "not found", "nvml": "not found (no NVIDIA driver)"} {
		if !strings.HasPrefix(lines[key], want) {
			t.Errorf("%s: %q, want it to start with %q", key, lines[key], want)
		}
	}
}

func TestPassthroughNeedsLinux69AndRoot(t *testing.T) {
	for _, c := range []struct {
		major, minor int
		root         bool
		want         string
	}{
		{6, 8, true, "no: the kernel"}, {5, 15, true, "no: the kernel"}, {6, 9, false, "no: it needs root"},
		{6, 9, true, "yes"}, {7, 0, true, "yes"},
	} {
		if got := passthrough(c.major, c.minor, c.root); !strings.HasPrefix(got, c.want) {
			t.Errorf("Linux %d.%d, root %v: %q, want %q…", c.major, c.minor, c.root, got, c.want)
		}
	}
}
