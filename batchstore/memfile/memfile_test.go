package memfile

import (
	"bytes"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func allocators(t *testing.T) map[string]*Allocator {
	out := map[string]*Allocator{"memfd": NewMemFD()}
	if os.Geteuid() == 0 {
		a, err := NewTmpfs(t.TempDir())
		if err != nil {
			t.Fatalf("tmpfs as root: %v", err)
		}
		t.Cleanup(func() {
			if err := a.Close(); err != nil {
				t.Error(err)
			}
		})
		out["tmpfs"] = a
	}
	// Every user's (user namespaces on: Debian's default; the test
	// machines' too).
	u, err := NewUserTmpfs(os.Args[0], t.TempDir())
	if err != nil {
		t.Fatalf("tmpfs in a user namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := u.Close(); err != nil {
			t.Error(err)
		}
	})
	out["userns"] = u
	return out
}

// TestMain runs the test binary as the user namespace tmpfs helper where
// NewUserTmpfs starts it so.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == HelperArg {
		os.Exit(RunHelper(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func TestWriteTruncateReadFree(t *testing.T) {
	for name, a := range allocators(t) {
		t.Run(name, func(t *testing.T) {
			f, err := a.Create(3 * 4096)
			if err != nil {
				t.Fatal(err)
			}
			copy(f.Bytes(), bytes.Repeat([]byte("ab"), 3*2048))
			if err := f.Truncate(5000); err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(6000); err == nil {
				t.Fatal("truncate can grow the file")
			}
			if err := f.Seal(); err != nil {
				t.Fatal(err)
			}
			var st unix.Stat_t
			if err := unix.Fstat(f.Fd(), &st); err != nil || st.Size != 5000 || f.Size() != 5000 {
				t.Fatalf("size after truncate: fstat %d, Size %d (%v)", st.Size, f.Size(), err)
			}
			got := make([]byte, 10)
			if n, err := f.ReadAt(got, 4990); err != nil || n != 10 || string(got) != "ababababab" {
				t.Fatalf("ReadAt: %q %d %v", got, n, err)
			}
			if err := f.Free(); err != nil {
				t.Fatal(err)
			}
			if err := f.Free(); err == nil {
				t.Fatal("second Free did not fail")
			}
			if _, err := f.ReadAt(got, 0); err == nil {
				t.Fatal("ReadAt after Free did not fail")
			}
		})
	}
}

func TestCreateRejectsEmpty(t *testing.T) {
	if _, err := NewMemFD().Create(0); err == nil {
		t.Fatal("zero-size file created")
	}
}

// TestLingeringCountsWhatMappingsKeep: a freed file that a reader still
// maps keeps its pages; Lingering counts them until the mapping goes,
// and never counts files not yet freed.
func TestLingeringCountsWhatMappingsKeep(t *testing.T) {
	if got := NewMemFD().Lingering(); got != -1 {
		t.Errorf("memfd Lingering: %d, want -1 (unknown)", got)
	}
	a := allocators(t)["tmpfs"]
	if a == nil {
		t.Fatal("needs root for a private tmpfs")
	}
	const size = 1<<20 + 4096
	live, err := a.Create(size)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Free()
	f, err := a.Create(size)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []*File{live, f} {
		for i := range file.Bytes() {
			file.Bytes()[i] = byte(i)
		}
	}
	if got := a.Lingering(); got != 0 {
		t.Fatalf("two live files, nothing freed: Lingering %d, want 0", got)
	}
	reader, err := unix.Mmap(f.Fd(), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Free(); err != nil {
		t.Fatal(err)
	}
	if got := a.Lingering(); got < size || got > size+2<<20 {
		t.Fatalf("freed but mapped: Lingering %d, want %d rounded up to a page", got, size)
	}
	if reader[size-1] != byte((size-1)%256) {
		t.Fatal("the mapping lost its bytes")
	}
	if err := unix.Munmap(reader); err != nil {
		t.Fatal(err)
	}
	if got := a.Lingering(); got != 0 {
		t.Fatalf("unmapped: Lingering %d, want 0", got)
	}
}
