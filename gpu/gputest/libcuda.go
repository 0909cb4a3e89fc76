package gputest

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tsock/tsock/gpu"
)

//go:embed testdata/fakecuda.c
var fakeCUDA []byte

// FakeUUID is the UUID the fake libcuda gives device n.
func FakeUUID(n int) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(0x10*(n+1) + i)
	}
	return gpu.FormatUUID(b)
}

// LibCUDA compiles the fake libcuda.so.1 with gcc (cflags added, e.g.
// -DNO_IPC) and returns its path; the real binding loads it like the
// driver's.
func LibCUDA(t testing.TB, cflags ...string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "fakecuda.c")
	if err := os.WriteFile(src, fakeCUDA, 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "libcuda.so.1")
	args := append([]string{"-shared", "-fPIC", "-O1", "-o", lib, src}, cflags...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("build fake libcuda: %v\n%s", err, out)
	}
	return lib
}
