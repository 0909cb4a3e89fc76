package fs_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsock/tsock/batchstore/waittest"
	"golang.org/x/sys/unix"
)

// bigContent is a batch of n bytes that spans several readahead windows
// and ends inside one, distinct per seq at every 4 KiB.
func bigContent(seq, n int) []byte {
	b := make([]byte, 0, n+64)
	for page := 0; len(b) < n; page++ {
		b = append(b, fmt.Sprintf("batch %06d page %06d|", seq, page)...)
		for len(b)%4096 != 0 && len(b) < n {
			b = append(b, byte('a'+seq%26))
		}
	}
	return b[:n]
}

// Without passthrough, a batch is read ahead whole by the daemon once a
// consumer has looked it up, before its reader asks, every reply spliced
// from the batch's file: the reader then finds every page in the page
// cache, and none of its reads reaches the daemon.
func TestABatchIsReadAheadOnceLookedUp(t *testing.T) {
	e := mount(t, false)
	e.join("a")
	data := bigContent(0, 3<<20+12345)
	e.publishBytes(0, data)
	var st unix.Stat_t
	if err := unix.Stat(e.batch("a", 0), &st); err != nil { // the lookup, no open
		t.Fatal(err)
	}
	// A reply is counted as spliced once it is written, just after it
	// is counted as served.
	waittest.Until(t, "the daemon reads the batch ahead, every reply spliced", func() bool {
		_, served := e.m.Served()
		return served >= uint64(len(data)) && e.m.Spliced() >= served
	})
	before, served := e.m.Served()
	if spliced := e.m.Spliced(); spliced != served {
		t.Errorf("%d of the %d bytes read ahead were spliced from the batch's file, not all", spliced, served)
	}
	got, err := os.ReadFile(e.batch("a", 0))
	if err != nil || sum(got) != sum(data) {
		t.Fatalf("the reader got %d wrong bytes: %v", len(got), err)
	}
	if after, _ := e.m.Served(); after != before {
		t.Fatalf("%d of the reader's bytes came from the daemon: the batch was not in the page cache", after-before)
	}
	if filled, failed := e.m.ReadAhead(); filled == 0 || failed != 0 {
		t.Fatalf("read ahead %d batches, %d failed", filled, failed)
	}
	waittest.Until(t, "the batch consumed and freed", func() bool { return e.store.Snapshot().Freed == 1 })
}

// MOUNTPOINT/.fill is the daemon's alone: not listed, and nothing in it
// opens for anyone else; with passthrough it does not exist.
func TestTheFillDirectoryIsTheDaemonsAlone(t *testing.T) {
	e := mount(t, false)
	e.join("a")
	e.publish(0)
	if _, err := os.Stat(e.batch("a", 0)); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n.Name(), ".") {
			t.Errorf("the mount lists %q", n.Name())
		}
	}
	if _, err := os.ReadFile(filepath.Join(e.dir, ".fill", "0")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("another process opened .fill/0: %v", err)
	}
	if names, err := os.ReadDir(filepath.Join(e.dir, ".fill")); err != nil || len(names) != 0 {
		t.Errorf(".fill lists %v (%v)", names, err)
	}
	if cs, _ := e.store.ConsumerSnapshot("a"); cs.BatchesRead != 0 || cs.OpenBatches != 0 {
		t.Errorf("the consumer's batch was touched: %+v", cs)
	}
	pt := mount(t, true)
	if _, err := os.Stat(filepath.Join(pt.dir, ".fill")); pt.m.Passthrough() && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("with passthrough, .fill: %v", err)
	}
}

// Memory freed is memory reused: each batch is published only once the
// one before it is freed, so that its memory file takes the freed one's
// place (its descriptor number, its pages). A reader, and a late reader
// (another consumer, by mmap in another process, after the first has
// read the batch into the page cache and released it), must see only
// the new batch's bytes, never a page of an earlier batch.
func TestARecycledBufferNeverShowsOldBytes(t *testing.T) {
	both(t, func(t *testing.T, e *env) {
		e.join("a", "b")
		const n = 4
		for i := range n {
			data := bigContent(i, 1<<20+4096*i+100)
			e.publishBytes(i, data)
			got, err := os.ReadFile(e.batch("a", i))
			if err != nil || sum(got) != sum(data) {
				t.Fatalf("batch %d: the reader got %d wrong bytes: %v", i, len(got), err)
			}
			if mapped := mapSum(t, e.batch("b", i)); mapped != sum(data) {
				t.Fatalf("batch %d: the late reader's mapping has other bytes than the batch's", i)
			}
			waittest.Until(t, fmt.Sprintf("batch %d freed", i), func() bool { return e.store.Snapshot().Freed == uint64(i+1) })
		}
	})
}

// mapSum maps path in another process (TSOCK_TEST_MAPPER) and returns
// the sum of the mapping's bytes; the mapper unmaps and exits after.
func mapSum(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TSOCK_TEST_MAPPER="+path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	stdin.Close()
	if werr := cmd.Wait(); err != nil || werr != nil {
		t.Fatalf("mapper of %s: %v, %v", path, err, werr)
	}
	return strings.TrimSpace(line)
}
