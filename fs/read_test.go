package fs_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs/fusetest"
	"golang.org/x/sys/unix"
)

func TestReadsAreSharedAndConsumed(t *testing.T) {
	both(t, func(t *testing.T, e *env) {
		e.join("a", "b")
		e.publish(0)
		e.publish(1)
		var sa, sb syscall.Stat_t
		if err := syscall.Stat(e.batch("a", 0), &sa); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Stat(e.batch("b", 0), &sb); err != nil {
			t.Fatal(err)
		}
		if sa.Ino != sb.Ino {
			t.Fatalf("one batch, two inodes: %d and %d", sa.Ino, sb.Ino)
		}
		got, err := os.ReadFile(e.batch("a", 0))
		if err != nil || sum(got) != sum(content(0)) {
			t.Fatalf("a read wrong bytes: %v", err)
		}
		waittest.Until(t, "a's release", func() bool { cs, _ := e.store.ConsumerSnapshot("a"); return cs.BatchesRead == 1 })
		if _, err := os.Stat(e.batch("a", 0)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("a's consumed batch still there: %v", err)
		}
		if e.store.Snapshot().Held != 2 {
			t.Fatal("batch freed before b read it")
		}
		got, err = os.ReadFile(e.batch("b", 0))
		if err != nil || sum(got) != sum(content(0)) {
			t.Fatalf("b read wrong bytes: %v", err)
		}
		waittest.Until(t, "b's release", func() bool { return e.store.Snapshot().Freed == 1 })
		if snap := e.store.Snapshot(); snap.Held != 1 || snap.Freed != 1 {
			t.Fatalf("after both read: held %d freed %d, want 1 1", snap.Held, snap.Freed)
		}
		if cs, _ := e.store.ConsumerSnapshot("a"); cs.BatchesRead != 1 || cs.Position != 1 {
			t.Fatalf("a's status %+v", cs)
		}
	})
}

func TestPassthroughKeepsReadsOutOfTheDaemon(t *testing.T) {
	fusetest.NeedRoot(t, "FUSE passthrough needs CAP_SYS_ADMIN")
	fusetest.NeedKernel(t, 6, 9, "FUSE passthrough")
	e := mount(t, true)
	e.join("a")
	e.publish(0)
	if _, err := os.ReadFile(e.batch("a", 0)); err != nil {
		t.Fatal(err)
	}
	if !e.m.Passthrough() {
		t.Fatalf("reads came to the daemon: %s", e.m.DataPath())
	}
}

func TestLookupBlocksUntilPublished(t *testing.T) {
	both(t, func(t *testing.T, e *env) {
		e.join("a")
		got := make(chan []byte, 1)
		go func() {
			b, err := os.ReadFile(e.batch("a", 0))
			if err != nil {
				t.Errorf("read: %v", err)
			}
			got <- b
		}()
		waitWaiting(t, e, "a")
		select {
		case <-got:
			t.Fatal("read returned before the batch was published")
		default:
		}
		e.publish(0)
		if b := <-got; sum(b) != sum(content(0)) {
			t.Fatal("blocked reader got wrong bytes")
		}
	})
}

// waitWaiting returns once consumer name is blocked in a lookup; the
// reader has no way to say so itself.
func waitWaiting(t *testing.T, e *env, name string) {
	t.Helper()
	waittest.Until(t, name+" blocked in a lookup", func() bool {
		cs, err := e.store.ConsumerSnapshot(name)
		return err == nil && cs.Waiting
	})
}

func TestSignalInterruptsTheWait(t *testing.T) {
	e := mount(t, true)
	e.join("a")
	tid := make(chan int, 1)
	res := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the signal goes to this thread
		tid <- unix.Gettid()
		fd, err := unix.Open(e.batch("a", 0), unix.O_RDONLY, 0)
		if err == nil {
			unix.Close(fd)
		}
		res <- err
	}()
	thread := <-tid
	waitWaiting(t, e, "a")
	// SIGURG: the Go runtime has a handler for it and otherwise ignores it.
	if err := unix.Tgkill(os.Getpid(), thread, unix.SIGURG); err != nil {
		t.Fatal(err)
	}
	if err := <-res; !errors.Is(err, unix.EINTR) {
		t.Fatalf("interrupted open: got %v, want EINTR", err)
	}
	if cs, _ := e.store.ConsumerSnapshot("a"); cs.Waiting {
		t.Fatal("consumer still marked waiting after the interrupt")
	}
	e.publish(0) // and the mount still works
	if _, err := os.ReadFile(e.batch("a", 0)); err != nil {
		t.Fatal(err)
	}
}

// TestMappingHoldsTheBatch: a reader that maps a batch and closes the file
// keeps valid bytes until it unmaps. Served by the daemon, the batch stays
// unconsumed until the munmap (the kernel releases the file then). Served
// by passthrough, the kernel moves the mapping onto the backing file and
// releases the FUSE file at close: the batch is consumed and freed then,
// and the mapping must still read the same bytes.
func TestMappingHoldsTheBatch(t *testing.T) {
	both(t, func(t *testing.T, e *env) {
		e.join("a")
		e.publish(0)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "TSOCK_TEST_MAPPER="+e.batch("a", 0))
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out := bufio.NewReader(stdout)
		want := sum(content(0))
		if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != want {
			t.Fatalf("mapping has wrong bytes (%v)", err)
		}
		if e.m.Passthrough() {
			waittest.Until(t, "release at close", func() bool { return e.store.Snapshot().Freed == 1 })
		} else if cs, _ := e.store.ConsumerSnapshot("a"); cs.BatchesRead != 0 || cs.OpenBatches != 1 {
			t.Fatalf("consumed while still mapped: %+v", cs)
		}
		fmt.Fprintln(stdin, "again")
		if line, err := out.ReadString('\n'); err != nil || strings.TrimSpace(line) != want {
			t.Fatalf("mapping changed while held (%v)", err)
		}
		stdin.Close() // the mapper unmaps and exits
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		waittest.Until(t, "consumption after munmap", func() bool { return e.store.Snapshot().Freed == 1 })
	})
}

// TestBatchesHeldForAnotherConsumerAreForgottenWhenFreed: a batch one
// consumer has read but another has yet to read stays known to the
// kernel (its page cache is shared); when the store frees it without a
// file of it being released (here the other consumer leaves), the store's
// Invalidator port tells the forgetter, which asks the kernel to forget
// it: no batch is left behind, and the store is never asked again (it
// used to be asked every 100 ms for each file held so).
func TestBatchesHeldForAnotherConsumerAreForgottenWhenFreed(t *testing.T) {
	fusetest.NeedKernel(t, 6, 16, "NOTIFY_PRUNE (the kernel forgets released batches)")
	e := mount(t, true)
	e.join("a")
	e.join("b")
	const n = 20
	for seq := range n {
		e.publish(seq)
	}
	for i := range n {
		data, err := os.ReadFile(e.batch("a", i))
		if err != nil || sum(data) != sum(content(i)) {
			t.Fatalf("a's batch %d: %v", i, err)
		}
	}
	// The kernel releases a file after its close returns: a's last
	// release may still be on its way.
	waittest.Until(t, "a's reads released", func() bool { cs, _ := e.store.ConsumerSnapshot("a"); return cs.BatchesRead == n })
	if snap := e.store.Snapshot(); snap.Freed != 0 {
		t.Fatalf("%d batches freed while b has yet to read them", snap.Freed)
	}
	if err := os.Remove(e.path("consumers", "b")); err != nil {
		t.Fatal(err)
	}
	// Freed at b's leaving; a batch the daemon's filler still holds (read
	// ahead for b, without passthrough) at the filler's release.
	waittest.Until(t, "every batch freed once b left", func() bool { return e.store.Snapshot().Freed == n })
	// The kernel's forget has no event to wait on.
	waittest.Report(t, func() bool { return e.m.BatchInodes() <= 2 }, func() string {
		return fmt.Sprintf("%d batch inodes held after a read %d batches and b left: want them forgotten", e.m.BatchInodes(), n)
	})
}

// A long run keeps the daemon flat: once a consumer has read a batch, the
// kernel is told to drop its name, so it forgets the inode and the daemon
// frees it (it kept one per batch ever read, 316,000 in a run-forever
// test, until the consumer left).
func TestReadBatchesAreForgotten(t *testing.T) {
	fusetest.NeedKernel(t, 6, 16, "NOTIFY_PRUNE (the kernel forgets released batches)")
	both(t, func(t *testing.T, e *env) {
		e.join("a")
		const n = 200
		published := make(chan struct{})
		go func() {
			defer close(published)
			for seq := range n {
				e.publish(seq)
			}
		}()
		for i := range n {
			data, err := os.ReadFile(e.batch("a", i))
			if err != nil || sum(data) != sum(content(i)) {
				t.Fatalf("batch %d: %v", i, err)
			}
		}
		<-published
		// The kernel's forget has no event to wait on.
		waittest.Report(t, func() bool { return e.m.BatchInodes() <= 2 }, func() string {
			return fmt.Sprintf("%d batch inodes held after reading %d batches: want them forgotten", e.m.BatchInodes(), n)
		})
	})
}
