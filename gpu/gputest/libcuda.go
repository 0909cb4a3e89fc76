package gputest

import (
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

//go:embed testdata/fakecuda.c
var fakeCUDA []byte

// FakeUUID is the UUID the fake libcuda gives device n.
func FakeUUID(n int) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(0x10*(n+1) + i)
	}
	h := hex.EncodeToString(b[:])
	return fmt.Sprintf("GPU-%s-%s-%s-%s-%s", h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
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
