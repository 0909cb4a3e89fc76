package main

import (
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/tsock/tsock/fs/fusetest"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/producertest"
)

// TestMountGivesEachWorkerAP: a mount of the built-in pipeline runs Go
// with a P per core and one more per worker (producer.GoProcs: a worker
// in C holds its P), and leaves a GOMAXPROCS the user set alone.
func TestMountGivesEachWorkerAP(t *testing.T) {
	fusetest.Need(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	folder := producertest.Folder(t, 4, 2)
	const sentinel = 1
	for _, tc := range []struct {
		env  string
		want int
	}{
		{"", runtime.NumCPU() + 3},
		{"7", sentinel}, // the runtime read it at start; tsock must not override it
	} {
		t.Setenv("GOMAXPROCS", tc.env)
		runtime.GOMAXPROCS(sentinel)
		c := &mountCommand{stdout: io.Discard}
		if err := c.Parse([]string{t.TempDir(), "--source", folder, "--workers", "3"}); err != nil {
			t.Fatal(err)
		}
		d := &daemon{stdout: io.Discard, mountFlags: c.mountFlags}
		err := d.setUp(t.Context())
		got := runtime.GOMAXPROCS(0)
		if cerr := d.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("GOMAXPROCS=%q: a mount with 3 workers runs with GOMAXPROCS %d, want %d", tc.env, got, tc.want)
		}
	}
	if got, want := producer.GoProcs(3), runtime.NumCPU()+3; got != want {
		t.Errorf("GoProcs(3) = %d, want %d", got, want)
	}
}

// TestDaemonGOGC: the daemon collects at GOGC 50 (its heap is long-lived
// arrays: half the headroom, measured 171 against 131 MiB), and leaves a
// GOGC the user set alone.
func TestDaemonGOGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	tuneGC()
	if got := debug.SetGCPercent(100); got != daemonGCPercent {
		t.Fatalf("GOGC %d without the user's, want %d", got, daemonGCPercent)
	}
	t.Setenv("GOGC", "100")
	tuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC %d with the user's 100", got)
	}
}
