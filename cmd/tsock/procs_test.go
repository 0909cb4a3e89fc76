package main

import (
	"io"
	"runtime"
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
		err := c.setUp(t.Context())
		got := runtime.GOMAXPROCS(0)
		if cerr := c.Close(); err == nil {
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
