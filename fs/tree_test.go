package fs_test

import (
	"errors"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/tsock/tsock/batchstore/waittest"
)

func TestTreeAndJoinLeave(t *testing.T) {
	e := mount(t, true)
	if got, err := os.ReadFile(e.path("status")); err != nil || string(got) != "ok\n" {
		t.Fatalf("status: %q %v", got, err)
	}
	e.join("trial-1", "trial_2")
	if got := e.store.Consumers(); strings.Join(got, ",") != "trial-1,trial_2" {
		t.Fatalf("store consumers %v", got)
	}
	entries, err := os.ReadDir(e.path("consumers"))
	if err != nil || len(entries) != 2 {
		t.Fatalf("ls consumers: %v %v", entries, err)
	}
	st, err := os.ReadFile(e.path("consumers", "trial-1", "status"))
	if err != nil || !strings.Contains(string(st), "name: trial-1\n") || !strings.HasSuffix(string(st), "\n") {
		t.Fatalf("consumer status %q %v", st, err)
	}
	if err := os.Remove(e.path("consumers", "trial-1")); err != nil {
		t.Fatalf("rmdir: %v", err)
	}
	if e.store.HasConsumer("trial-1") {
		t.Fatal("rmdir did not leave")
	}
	if _, err := os.Stat(e.path("consumers", "trial-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("left consumer still visible: %v", err)
	}
	// The name can be used again.
	e.join("trial-1")
}

func TestBadMkdir(t *testing.T) {
	e := mount(t, true)
	e.join("a")
	for _, tc := range []struct {
		path string
		want syscall.Errno
	}{
		{e.path("consumers", "a"), syscall.EEXIST},
		{e.path("consumers", "bad name"), syscall.EINVAL},
		{e.path("consumers", "-dash"), syscall.EINVAL},
		{e.path("consumers", strings.Repeat("x", 65)), syscall.EINVAL},
		{e.path("newdir"), syscall.EROFS},
		{e.path("consumers", "a", "sub"), syscall.EROFS},
	} {
		if err := os.Mkdir(tc.path, 0o755); !errors.Is(err, tc.want) {
			t.Errorf("mkdir %s: got %v, want %v", tc.path, err, tc.want)
		}
	}
	if got := e.store.Consumers(); len(got) != 1 {
		t.Fatalf("bad mkdirs changed the consumers: %v", got)
	}
}

func TestEverythingElseIsReadOnly(t *testing.T) {
	e := mount(t, true)
	e.join("a")
	e.publish(0)
	if _, err := os.Stat(e.batch("a", 0)); err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func() error{
		"create in root":       func() error { return os.WriteFile(e.path("new"), nil, 0o644) },
		"create in consumer":   func() error { return os.WriteFile(e.path("consumers", "a", "x"), nil, 0o644) },
		"write status":         func() error { return os.WriteFile(e.path("status"), []byte("x"), 0o644) },
		"write batch":          func() error { return os.WriteFile(e.batch("a", 0), []byte("x"), 0o644) },
		"open batch rdwr":      func() error { f, err := os.OpenFile(e.batch("a", 0), os.O_RDWR, 0); f.Close(); return err },
		"truncate batch":       func() error { return os.Truncate(e.batch("a", 0), 0) },
		"chmod status":         func() error { return os.Chmod(e.path("status"), 0o777) },
		"rename consumer":      func() error { return os.Rename(e.path("consumers", "a"), e.path("consumers", "b")) },
		"symlink":              func() error { return os.Symlink("x", e.path("consumers", "a", "l")) },
		"rmdir consumers":      func() error { return syscall.Rmdir(e.path("consumers")) },
		"unlink status":        func() error { return os.Remove(e.path("status")) },
		"unlink consumer stat": func() error { return os.Remove(e.path("consumers", "a", "status")) },
	} {
		err := op()
		if !errors.Is(err, syscall.EROFS) && !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EACCES) {
			t.Errorf("%s: got %v, want EROFS, EPERM or EACCES", name, err)
		}
	}
	// Nothing changed: the batch is intact and still a's.
	got, err := os.ReadFile(e.batch("a", 0))
	if err != nil || sum(got) != sum(content(0)) {
		t.Fatalf("batch changed or gone: %v", err)
	}
}

func TestListingShowsUnconsumedBatches(t *testing.T) {
	e := mount(t, true)
	e.join("a")
	for i := 0; i < 3; i++ {
		e.publish(i)
	}
	if _, err := os.ReadFile(e.batch("a", 0)); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, "release", func() bool { cs, _ := e.store.ConsumerSnapshot("a"); return cs.BatchesRead == 1 })
	entries, err := os.ReadDir(e.path("consumers", "a"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range entries {
		names = append(names, de.Name())
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "000001.safetensors 000002.safetensors batch_size state status subset" {
		t.Fatalf("ls: %v", names)
	}
	st, err := os.Stat(e.batch("a", 2))
	if err != nil || st.Size() != int64(len(content(2))) {
		t.Fatalf("stat size %v, want %d (%v)", st, len(content(2)), err)
	}
}
