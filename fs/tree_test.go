package fs_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/tsock/tsock/batchstore/waittest"
)

// The tests in this file run twice (layers): over the node layer in
// process, and through a real mount.

func TestTreeAndJoinLeave(t *testing.T) {
	layers(t, func(t *testing.T, e *env, tr tree) {
		if got, err := tr.ReadFile("status"); err != nil || string(got) != "ok\n" {
			t.Fatalf("status: %q %v", got, err)
		}
		for _, n := range []string{"trial-1", "trial_2"} {
			if err := tr.Mkdir("consumers/" + n); err != nil {
				t.Fatalf("join %s: %v", n, err)
			}
		}
		if got := e.store.Consumers(); strings.Join(got, ",") != "trial-1,trial_2" {
			t.Fatalf("store consumers %v", got)
		}
		if entries, err := tr.ReadDir("consumers"); err != nil || strings.Join(entries, ",") != "trial-1,trial_2" {
			t.Fatalf("ls consumers: %v %v", entries, err)
		}
		st, err := tr.ReadFile("consumers/trial-1/status")
		if err != nil || !strings.Contains(string(st), "name: trial-1\n") || !strings.HasSuffix(string(st), "\n") {
			t.Fatalf("consumer status %q %v", st, err)
		}
		if err := tr.Rmdir("consumers/trial-1"); err != nil {
			t.Fatalf("rmdir: %v", err)
		}
		if slices.Contains(e.store.Consumers(), "trial-1") {
			t.Fatal("rmdir did not leave")
		}
		if _, err := tr.Size("consumers/trial-1"); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("left consumer still visible: %v", err)
		}
		if err := tr.Mkdir("consumers/trial-1"); err != nil { // the name can be used again
			t.Fatalf("join again: %v", err)
		}
	})
}

func TestBadMkdir(t *testing.T) {
	layers(t, func(t *testing.T, e *env, tr tree) {
		if err := tr.Mkdir("consumers/a"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			path string
			want syscall.Errno
		}{
			{"consumers/a", syscall.EEXIST},
			{"consumers/bad name", syscall.EINVAL},
			{"consumers/-dash", syscall.EINVAL},
			{"consumers/" + strings.Repeat("x", 65), syscall.EINVAL},
			{"newdir", syscall.EROFS},
			{"consumers/a/sub", syscall.EINVAL}, // only a rank's number, in a group
			{"consumers/a/0", syscall.EINVAL},   // a is not a group
		} {
			if err := tr.Mkdir(tc.path); !errors.Is(err, tc.want) {
				t.Errorf("mkdir %s: got %v, want %v", tc.path, err, tc.want)
			}
		}
		if got := e.store.Consumers(); len(got) != 1 {
			t.Fatalf("bad mkdirs changed the consumers: %v", got)
		}
	})
}

// Reading a batch whole and closing it consumes it: with no other
// consumer it is freed; an unlink consumes one unread; past the end of
// the data, and for names no batch has, ENOENT.
func TestReadConsumesAndTheEndIsENOENT(t *testing.T) {
	layers(t, func(t *testing.T, e *env, tr tree) {
		if err := tr.Mkdir("consumers/a"); err != nil {
			t.Fatal(err)
		}
		for seq := range 3 {
			e.publish(seq)
		}
		e.store.Finish()
		if size, err := tr.Size("consumers/a/000000.safetensors"); err != nil || size != contentSize {
			t.Fatalf("size of batch 0: %d (%v), want %d", size, err, contentSize)
		}
		got, err := tr.ReadFile("consumers/a/000000.safetensors")
		if err != nil || sum(got) != sum(content(0)) {
			t.Fatalf("batch 0: %d bytes (%v), not batch 0's", len(got), err)
		}
		waittest.Until(t, "batch 0 consumed and freed", func() bool {
			cs, _ := e.store.ConsumerSnapshot("a")
			return cs.BatchesRead == 1 && e.store.Snapshot().Freed == 1
		})
		if err := tr.Remove("consumers/a/000001.safetensors"); err != nil {
			t.Fatalf("unlink batch 1: %v", err)
		}
		if snap := e.store.Snapshot(); snap.Freed != 2 {
			t.Fatalf("unlinked batch not freed: %d freed", snap.Freed)
		}
		if err := tr.Remove("consumers/a/000001.safetensors"); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("second unlink: %v", err)
		}
		for _, name := range []string{"000003.safetensors", "2.safetensors", "0000002.safetensors",
			"000000.bin", "abc", "-00001.safetensors", "99999999999999999999999.safetensors"} {
			if _, err := tr.Size("consumers/a/" + name); !errors.Is(err, syscall.ENOENT) {
				t.Errorf("%s: got %v, want ENOENT", name, err)
			}
		}
		if _, err := tr.Size("consumers/nobody/000000.safetensors"); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("unknown consumer: %v", err)
		}
		if got, err := tr.ReadFile("consumers/a/000002.safetensors"); err != nil || sum(got) != sum(content(2)) {
			t.Fatalf("last batch: %d bytes (%v)", len(got), err)
		}
	})
}

// Control files: a good write takes, a bad one is EINVAL and changes
// nothing; files nobody may write are EROFS.
func TestControlWritesAndReadOnlyFiles(t *testing.T) {
	layers(t, func(t *testing.T, e *env, tr tree) {
		if err := tr.Mkdir("consumers/a"); err != nil {
			t.Fatal(err)
		}
		if err := tr.WriteFile("consumers/a/batch_size", []byte("3\n")); err != nil {
			t.Fatalf("batch_size 3: %v", err)
		}
		for _, bad := range []string{"0\n", "abc", "-2"} {
			if err := tr.WriteFile("consumers/a/batch_size", []byte(bad)); !errors.Is(err, syscall.EINVAL) {
				t.Errorf("batch_size %q: got %v, want EINVAL", bad, err)
			}
		}
		if got, err := tr.ReadFile("consumers/a/batch_size"); err != nil || string(got) != "3\n" {
			t.Fatalf("batch_size after bad writes: %q (%v), want 3", got, err)
		}
		if err := tr.WriteFile("consumers/a/subset", []byte("fold 9/5\n")); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("subset fold 9/5: got %v, want EINVAL", err)
		}
		for _, path := range []string{"status", "new", "consumers/a/x", "consumers/a/status"} {
			if err := tr.WriteFile(path, []byte("x")); !errors.Is(err, syscall.EROFS) && !errors.Is(err, syscall.EACCES) {
				t.Errorf("write %s: got %v, want EROFS (or EACCES from the kernel's modes)", path, err)
			}
		}
		for seq := range 4 {
			e.publish(seq)
		}
		got, err := tr.ReadFile("consumers/a/000000.safetensors")
		want := string(content(0)) + string(content(1)) + string(content(2))
		if err != nil || string(got) != want {
			t.Fatalf("re-batched batch 0: %d bytes (%v), want batches 0-2 (%d)", len(got), err, len(want))
		}
	})
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
	layers(t, func(t *testing.T, e *env, tr tree) {
		if err := tr.Mkdir("consumers/a"); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			e.publish(i)
		}
		if _, err := tr.ReadFile("consumers/a/000000.safetensors"); err != nil {
			t.Fatal(err)
		}
		waittest.Until(t, "release", func() bool { cs, _ := e.store.ConsumerSnapshot("a"); return cs.BatchesRead == 1 })
		names, err := tr.ReadDir("consumers/a")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(names, " ") != "000001.safetensors 000002.safetensors batch_size drop_last read_ahead state status subset world" {
			t.Fatalf("ls: %v", names)
		}
		if size, err := tr.Size("consumers/a/000002.safetensors"); err != nil || size != int64(len(content(2))) {
			t.Fatalf("stat size %d, want %d (%v)", size, len(content(2)), err)
		}
	})
}
