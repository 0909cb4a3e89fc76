// Package fusetest has what real-mount tests of several packages share.
package fusetest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tsock/tsock/fs"
	"golang.org/x/sys/unix"
)

// Need skips, loudly, where a real mount is impossible: no /dev/fuse
// this user may open, or, without root, no fusermount3 to mount through
// (fs.Mount asks mount(2) first and falls back to it, as tsock does for
// every user without root). scripts/test.sh runs the fs tests a second
// time as an unprivileged user, so a test that needs only this runs on
// both paths.
func Need(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("SKIPPED: no /dev/fuse (%v): real-mount tests cannot run here", err)
	}
	if os.Geteuid() == 0 {
		return
	}
	if err := unix.Access("/dev/fuse", unix.R_OK|unix.W_OK); err != nil {
		t.Skipf("SKIPPED: /dev/fuse is not openable by uid %d (%v): real-mount tests cannot run here", os.Geteuid(), err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skipf("SKIPPED: not root and no fusermount3 on the PATH (%v): real-mount tests cannot run here", err)
	}
}

// RootOnly is the prefix of the skip of a test that needs root itself:
// scripts/test.sh's run as a user counts these apart (they ran as root
// in the same CI run) and fails on any other skip.
const RootOnly = "SKIPPED (root only): "

// NeedRoot skips, saying what needs root, where the test runs without
// it: passthrough (CAP_SYS_ADMIN), a tmpfs, changing /dev/fuse's mode or
// running as another user.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	Need(t)
	if os.Geteuid() != 0 {
		t.Skip(RootOnly + why)
	}
}

// Root says whether the test runs as root: a test that runs on both
// paths checks what differs (the data path) by it.
func Root() bool { return os.Geteuid() == 0 }

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
