// Package fusetest has what real-mount tests of several packages share.
package fusetest

import (
	"os"
	"strings"
	"testing"

	"github.com/tsock/tsock/fs"
)

// Need skips, loudly, where a real mount is impossible: no /dev/fuse, or
// not root (the tests mount with DirectMount).
func Need(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("SKIPPED: no /dev/fuse (%v): real-mount tests cannot run here", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: not root: real-mount tests mount with DirectMount and need root")
	}
}

// Mounted reports whether dir is a mount point now.
func Mounted(t testing.TB, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// NeedKernel skips, saying why, where the running kernel is older than
// major.minor, which feature needs: a prerequisite of the machine, not a
// fault of tsock. (scripts/test.sh fails CI on any skip: CI's kernel has
// every feature.)
func NeedKernel(t testing.TB, major, minor int, feature string) {
	t.Helper()
	release, maj, min := fs.Kernel()
	if maj < major || (maj == major && min < minor) {
		t.Skipf("SKIPPED: %s needs Linux %d.%d or later; this kernel is %s", feature, major, minor, release)
	}
}
