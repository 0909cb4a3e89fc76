package main

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// errHelp: the user asked for --help.
var errHelp = errors.New("help requested")

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args, turning pflag's errors into usage errors.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	fs.SetOutput(discard{})
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		if own := (flagValueError{}); errors.As(err, &own) {
			return usageError{own.error} // its message names the flag already
		}
		return usageError{err}
	}
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// flagUsage renders a flag set's defaults under a heading.
func flagUsage(head string, fs *pflag.FlagSet) string {
	return fmt.Sprintf("%s\nflags:\n%s", head, fs.FlagUsages())
}

// maxWorkers bounds --workers: far above any machine's cores, low enough
// that the workers' buffers cannot exhaust memory by themselves.
const maxWorkers = 4096

// maxSamples bounds --samples: ordered mode keeps two epochs' orders of
// 8 bytes a sample, and may take at most half the machine's memory.
func maxSamples() int64 { return machineMemory() / 32 }

// machineMemory is this machine's memory (8 GiB where it cannot be told):
// what sizes in flags that are memory are checked against, so that a
// value never kills the daemon ("fatal error: out of memory").
func machineMemory() int64 {
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return 8 << 30
	}
	return int64(uint64(info.Totalram) * uint64(info.Unit))
}
