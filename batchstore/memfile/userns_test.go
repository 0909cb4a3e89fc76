package memfile

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// A user namespace's tmpfs: no path leads to it (nothing mounted in this
// namespace), its files are open to this user's other processes through
// /proc/PID/fd with the bytes written through the mapping, and the
// memory lingering after a free is counted (a mapping outliving it), as
// on root's tmpfs.
func TestUserTmpfsIsPrivateAndReadAroundIt(t *testing.T) {
	parent := t.TempDir()
	a, err := NewUserTmpfs(os.Args[0], parent)
	if err != nil {
		t.Fatalf("tmpfs in a user namespace: %v", err)
	}
	defer a.Close()
	if d := a.Describe(); d != "tmpfs huge=advise in a user namespace" {
		t.Fatalf("Describe: %q", d)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), parent) {
		t.Fatalf("the helper's tmpfs shows in this namespace:\n%s", mounts)
	}
	const size = 8 << 20
	f, err := a.Create(size)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("tsock!!!"), size/8)
	copy(f.Bytes(), want)
	if err := f.Seal(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), f.Fd()))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the file through /proc/PID/fd: %d bytes, %v", len(got), err)
	}
	data, unmap, err := f.MapRead()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Free(); err != nil {
		t.Fatal(err)
	}
	if l := a.Lingering(); l < size/2 {
		t.Fatalf("a mapping outliving its file's free: %d bytes lingering, want about %d", l, size)
	}
	if !bytes.Equal(data[:8], want[:8]) {
		t.Fatal("the mapping changed")
	}
	unmap()
	if l := a.Lingering(); l != 0 {
		t.Fatalf("%d bytes lingering once the mapping is gone", l)
	}
}
