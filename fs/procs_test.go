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

	"golang.org/x/sys/unix"

	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs"
)

// TestMain doubles as a reader process: with TSOCK_TEST_READER=DIR it
// reads DIR's batches in order until ENOENT and prints each one's sum.
// With TSOCK_TEST_MAPPER=FILE it maps FILE, closes it, prints the
// mapping's sum, prints it again for every line on stdin, and unmaps
// when its stdin closes.
//
// Mappings of the mount are made in child processes only: a page fault on
// a daemon-served file from the process that serves it can deadlock with
// the Go runtime's stop-the-world.
func TestMain(m *testing.M) {
	if dir := os.Getenv("TSOCK_TEST_READER"); dir != "" {
		os.Exit(readerProcess(dir))
	}
	if file := os.Getenv("TSOCK_TEST_MAPPER"); file != "" {
		os.Exit(mapperProcess(file))
	}
	os.Exit(m.Run())
}

func mapperProcess(file string) int {
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	st, _ := f.Stat()
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(sum(m))
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Println(sum(m))
	}
	if err := unix.Munmap(m); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func readerProcess(dir string) int {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for i := uint64(0); ; i++ {
		b, err := os.ReadFile(filepath.Join(dir, fs.BatchName(i)))
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(w, sum(b))
	}
}

func TestSeveralReaderProcesses(t *testing.T) {
	both(t, func(t *testing.T, e *env) {
		const batches, readers = 12, 3
		var cmds []*exec.Cmd
		var outs []*strings.Builder
		for r := 0; r < readers; r++ {
			name := fmt.Sprintf("r%d", r)
			e.join(name)
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "TSOCK_TEST_READER="+e.path("consumers", name))
			out := &strings.Builder{}
			cmd.Stdout, cmd.Stderr = out, os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, outs = append(cmds, cmd), append(outs, out)
		}
		// Publish while the readers block for each next batch.
		for i := 0; i < batches; i++ {
			e.publish(i)
		}
		e.store.Finish()
		var want strings.Builder
		for i := 0; i < batches; i++ {
			fmt.Fprintln(&want, sum(content(i)))
		}
		for r, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("reader %d: %v", r, err)
			}
			if outs[r].String() != want.String() {
				t.Fatalf("reader %d read other bytes:\n%s\nwant\n%s", r, outs[r], want.String())
			}
		}
		waittest.Until(t, "every batch freed", func() bool { return e.store.Snapshot().Freed == batches })
	})
}
