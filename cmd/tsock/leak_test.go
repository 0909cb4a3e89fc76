package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs/fusetest"
)

// A mount run in-process, read from, and stopped leaves no goroutine
// behind: each one it starts has an owner that waits for it.
func TestMountLeavesNoGoroutine(t *testing.T) {
	fusetest.Need(t)
	for _, mode := range [][]string{{"--source", "synthetic:40", "--batch-size", "8", "--image-size", "16"}, {"--ingest"}} {
		before := runtime.NumGoroutine()
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		var stdout, stderr bytes.Buffer
		code := make(chan int, 1)
		go func() {
			code <- run(ctx, append([]string{"mount", dir, "--buffer", "1MiB"}, mode...), &stdout, &stderr)
		}()
		waittest.Until(t, "mounted", func() bool { _, err := os.Stat(filepath.Join(dir, "status")); return err == nil })
		if err := os.Mkdir(filepath.Join(dir, "consumers", "a"), 0o755); err != nil {
			t.Fatal(err)
		}
		if mode[0] == "--source" {
			if _, err := os.ReadFile(filepath.Join(dir, "consumers", "a", "000000.safetensors")); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		if c := <-code; c != 0 {
			t.Fatalf("%v: exit %d: %s", mode, c, stderr.String())
		}
		// Goroutines end asynchronously; nothing to wait on.
		waittest.Report(t, func() bool { return runtime.NumGoroutine() <= before }, func() string {
			buf := make([]byte, 1<<20)
			stacks := string(buf[:runtime.Stack(buf, true)])
			return fmt.Sprintf("%v: %d goroutines after the mount, %d before:\n%s", mode, runtime.NumGoroutine(), before, stacks)
		})
	}
}
