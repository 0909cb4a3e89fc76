package fs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs"
	"github.com/tsock/tsock/fs/fusetest"
	"golang.org/x/sys/unix"
)

// env is a store served at a fresh mount point.
type env struct {
	t     *testing.T
	store *batchstore.Store
	alloc *memfile.Allocator
	m     *fs.Mounted
	dir   string
	tr    tree // the node layer's, for nodeEnv
}

func mount(t *testing.T, passthrough bool, with ...func(*fs.Options)) *env {
	t.Helper()
	fusetest.Need(t)
	e := &env{t: t, store: batchstore.New(batchstore.Config{Limit: 64 << 20, SizeOf: func(n int) int64 { return int64(n) * contentSize }}), alloc: memfile.NewMemFD(), dir: t.TempDir()}
	probe, err := e.alloc.Create(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Free()
	opts := fs.Options{
		Status:      func() ([]byte, error) { return []byte("ok\n"), nil },
		Passthrough: passthrough, Backing: "memfd", ProbeFd: probe.Fd(), Compose: concat,
	}
	for _, f := range with {
		f(&opts)
	}
	e.m, err = fs.Mount(e.dir, e.store, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.store.Shutdown()
		if err := e.m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		e.store.Close()
	})
	return e
}

// both runs a test once per data path.
func both(t *testing.T, test func(t *testing.T, e *env)) {
	for _, pt := range []bool{true, false} {
		t.Run(fmt.Sprintf("passthrough=%v", pt), func(t *testing.T) {
			if pt {
				fusetest.NeedRoot(t, "FUSE passthrough needs CAP_SYS_ADMIN")
				fusetest.NeedKernel(t, 6, 9, "FUSE passthrough")
			}
			e := mount(t, pt)
			if pt != e.m.Passthrough() {
				t.Fatalf("asked passthrough=%v, got data path %q", pt, e.m.DataPath())
			}
			test(t, e)
		})
	}
}

// content is batch seq's bytes: distinct per batch, all contentSize long.
func content(seq int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("batch %06d|", seq)), contentSize/13)
}

const contentSize = 13 * 1000

// concat is the test's batch format: a batch of n samples is the n
// producer batches' bytes one after the other.
func concat(ref batchstore.Ref, blobs map[uint64]batchstore.Blob, _ string) (fs.BatchData, error) {
	var parts []batchstore.Blob
	for _, p := range ref.Pieces {
		parts = append(parts, blobs[p.Seq])
	}
	return concatData(parts), nil
}

type concatData []batchstore.Blob

func (c concatData) Size() int64 { return int64(len(c)) * contentSize }

func (c concatData) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) && off < c.Size() {
		k, err := c[off/contentSize].ReadAt(p[n:min(len(p), n+int(contentSize-off%contentSize))], off%contentSize)
		if err != nil {
			return n, err
		}
		n, off = n+k, off+int64(k)
	}
	return n, nil
}

// publish writes content(seq) into a memory file and publishes it.
func (e *env) publish(seq int) {
	e.t.Helper()
	e.publishBytes(seq, content(seq))
}

// publishBytes publishes data as producer batch seq (one sample).
func (e *env) publishBytes(seq int, data []byte) {
	e.t.Helper()
	f, err := e.alloc.Create(int64(len(data)))
	if err != nil {
		e.t.Fatal(err)
	}
	copy(f.Bytes(), data)
	if err := f.Seal(); err != nil {
		e.t.Fatal(err)
	}
	r, err := e.store.Reserve(context.Background(), int64(len(data)))
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := r.Publish(f, batchstore.Info{Epoch: 0, Index: seq, Samples: 1, FirstPos: seq, EndPos: seq + 1}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) path(parts ...string) string {
	return filepath.Join(append([]string{e.dir}, parts...)...)
}

func (e *env) batch(consumer string, local int) string {
	return e.path("consumers", consumer, fs.BatchName(uint64(local)))
}

func (e *env) join(names ...string) {
	e.t.Helper()
	for _, n := range names {
		if err := os.Mkdir(e.path("consumers", n), 0o755); err != nil {
			e.t.Fatalf("join %s: %v", n, err)
		}
	}
}

func sum(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

// Nothing is served before the mount is ready: a reader polling status
// from the moment the mount appears sees only what the caller set in
// Serving (cmd/tsock's status read a nil mount in that window). Serving
// returns only once the reader is seen blocked in an open of status in
// the mounted file system: the window is entered, not slept through.
func TestNothingIsServedBeforeServing(t *testing.T) {
	fusetest.Need(t)
	store := batchstore.New(batchstore.Config{Limit: 1 << 20, SizeOf: func(n int) int64 { return int64(n) }})
	alloc := memfile.NewMemFD()
	probe, err := alloc.Create(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Free()
	dir := t.TempDir()
	var set atomic.Bool
	stop := make(chan struct{})
	seen := make(chan string, 1)
	tids := make(chan int, 1)
	go func() { // polls as a script waiting for the mount does, until stopped (or for the wait's bound)
		runtime.LockOSThread() // its thread is watched in the kernel
		defer runtime.UnlockOSThread()
		tids <- unix.Gettid()
		early := ""
		defer func() { seen <- early }()
		for deadline := time.Now().Add(waittest.Limit); time.Now().Before(deadline); {
			select {
			case <-stop:
				return
			default:
			}
			if data, err := os.ReadFile(filepath.Join(dir, "status")); err == nil && string(data) != "ready\n" {
				early = string(data)
			}
		}
	}()
	poller := <-tids
	m, err := fs.Mount(dir, store, fs.Options{
		Status: func() ([]byte, error) {
			if !set.Load() {
				return []byte("served before Serving returned\n"), nil
			}
			return []byte("ready\n"), nil
		},
		Serving: func(*fs.Mounted) {
			// Not Until: a test that ends inside Mount would leave it mounted.
			if err := waittest.Wait("the reader waits in an open in the mount", func() bool { return inSyscall(poller, unix.SYS_OPENAT) }); err != nil {
				t.Error(err)
			}
			set.Store(true)
		},
		Backing: "memfd", ProbeFd: probe.Fd(), Compose: concat,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		store.Shutdown()
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		store.Close()
	}()
	waittest.Until(t, "status reads ready", func() bool { // the poller has read status meanwhile
		data, err := os.ReadFile(filepath.Join(dir, "status"))
		return err == nil && string(data) == "ready\n"
	})
	close(stop)
	if early := <-seen; early != "" {
		t.Fatalf("a reader got %q", early)
	}
}

// inSyscall says whether thread tid of this process is in system call nr
// now: a thread blocked in the kernel (a FUSE request waiting for its
// answer) stays there.
func inSyscall(tid int, nr int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/syscall", tid))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(data), " ")
	return first == strconv.Itoa(nr)
}
