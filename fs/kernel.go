package fs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Kernel is the running kernel's release (uname -r) and its major and
// minor numbers (0, 0 if it cannot be read): what the data path can use
// depends on it (passthrough since 6.9, NOTIFY_PRUNE since 6.16).
func Kernel() (release string, major, minor int) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown", 0, 0
	}
	release = unix.ByteSliceToString(u.Release[:])
	fmt.Sscanf(release, "%d.%d", &major, &minor)
	return release, major, minor
}
