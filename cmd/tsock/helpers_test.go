package main

import (
	"os"
	"strings"
	"testing"
)

// needFUSE skips, loudly, where a real mount is impossible.
func needFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("SKIPPED: no /dev/fuse (%v): real-mount tests cannot run here", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: not root: real-mount tests need root")
	}
}

// mounted reports whether dir is a mount point now.
func mounted(t *testing.T, dir string) bool {
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
