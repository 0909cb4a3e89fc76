package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tsock/tsock/fs"
	"github.com/tsock/tsock/fs/fusetest"
)

// holderProcess holds fd 3, a copy of an ingest writer's descriptor, and
// for each line on stdin tries to change the batch through it: a write
// at its start, a write that grows it by 32 MiB, a truncation to 0. It
// prints the three errnos ("0" for success) on one line. It exits at EOF,
// which closes its copy.
func holderProcess() int {
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("holding")
	for in.Scan() {
		_, werr := syscall.Pwrite(3, []byte("changed after publication"), 0)
		_, gerr := syscall.Pwrite(3, []byte("grown"), 32<<20)
		terr := syscall.Ftruncate(3, 0)
		fmt.Println(errnoName(werr), errnoName(gerr), errnoName(terr))
	}
	return 0
}

func errnoName(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e.Error()
	}
	if err != nil {
		return err.Error()
	}
	return "0"
}

// startHolder starts holderProcess with f as its fd 3.
func startHolder(t *testing.T, f *os.File) (cmd *exec.Cmd, ask func() string) {
	t.Helper()
	cmd = exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "TSOCK_TEST_HOLDER=1")
	cmd.ExtraFiles = []*os.File{f}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "holding" {
		t.Fatalf("holder did not start: %q", lines.Text())
	}
	return cmd, func() string {
		io.WriteString(stdin, "try\n")
		if !lines.Scan() {
			t.Fatal("holder gone")
		}
		return lines.Text()
	}
}

// createBatch creates ingest batch seq for writing.
func createBatch(t *testing.T, d *mountProc, seq uint64) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(d.dir, "ingest", fs.BatchName(seq)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestOnlyTheWritersCloseRulesOnABatch: closes of copies of a writer's
// descriptor made mid-write — a subprocess spawned (it closes the copy it
// inherits at exec), a child that inherits it and exits, a dup closed —
// neither publish nor refuse the half-written batch: the writer's own
// close publishes all of it, or refuses it with its errno.
func TestOnlyTheWritersCloseRulesOnABatch(t *testing.T) {
	d := startDaemon(t, "--ingest", "--samples", "8", "--order", "sequential", "--batch-size", "4", "--buffer", "1MiB")
	if err := os.Mkdir(filepath.Join(d.dir, "consumers", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	readFile(t, filepath.Join(d.dir, "ingest", "order")) // hands out the epoch's 8 indices
	copies := map[string]func(f *os.File){
		"subprocesses": func(f *os.File) {
			if err := exec.Command("true").Run(); err != nil { // forked with the copy, closed at exec
				t.Fatal(err)
			}
			child := exec.Command("sh", "-c", "exit 0")
			child.ExtraFiles = []*os.File{f} // a copy kept until the child exits
			if err := child.Run(); err != nil {
				t.Fatal(err)
			}
		},
		"a dup": func(f *os.File) {
			dup, err := syscall.Dup(int(f.Fd()))
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Close(dup); err != nil {
				t.Fatalf("close of the dup: %v", err)
			}
		},
	}
	for seq, how := range []string{"subprocesses", "a dup"} {
		batch := sampleBatch(t, nil, int64(4*seq), int64(4*seq+1), int64(4*seq+2), int64(4*seq+3))
		f := createBatch(t, d, uint64(seq))
		if _, err := f.Write(batch[:len(batch)/2]); err != nil {
			t.Fatal(err)
		}
		copies[how](f)
		if _, err := f.Write(batch[len(batch)/2:]); err != nil {
			t.Fatalf("%s: the write after the copy's close: %v", how, err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("%s: the writer's close: %v", how, err)
		}
		if next := readFile(t, filepath.Join(d.dir, "ingest", "next")); next != fmt.Sprintf("%d\n", seq+1) {
			t.Fatalf("%s: next is %q after the writer's close: the batch was not published\n%s", how, next,
				readFile(t, filepath.Join(d.dir, "ingest", "status")))
		}
		got, _ := readSamples(t, filepath.Join(d.dir, "consumers", "c", fs.BatchName(uint64(seq))))
		if want := fmt.Sprint([]int64{int64(4 * seq), int64(4*seq + 1), int64(4*seq + 2), int64(4*seq + 3)}); fmt.Sprint(got) != want {
			t.Fatalf("%s: consumer read %v, want %s", how, got, want)
		}
	}
	// A bad batch is refused at the writer's close, not at a copy's.
	f := createBatch(t, d, 2)
	if _, err := f.Write([]byte("not a batch")); err != nil {
		t.Fatal(err)
	}
	copies["subprocesses"](f)
	var errno syscall.Errno
	if err := f.Close(); !errors.As(err, &errno) || errno != syscall.EINVAL {
		t.Fatalf("the writer's close of a bad batch: %v, want EINVAL", err)
	}
	if st := readFile(t, filepath.Join(d.dir, "ingest", "status")); !strings.Contains(st, "refused: 1\n") {
		t.Fatalf("want one refusal:\n%s", st)
	}
	d.stop(t)
}

// TestPublishedBytesAreFinal: once the writer's close has published a
// batch, a process still holding a copy of the descriptor can neither
// write into it, grow it, nor truncate it (EPERM): a consumer's mapping
// keeps its bytes, and the buffer's count does not move. A batch being
// written cannot be mapped at all.
func TestPublishedBytesAreFinal(t *testing.T) {
	t.Parallel() // see parallelTests
	d := startDaemon(t, "--ingest", "--batch-size", "4", "--buffer", "4MiB")
	batch := sampleBatch(t, map[string]string{"last": "true"}, 0, 1, 2, 3)
	f := createBatch(t, d, 0)
	if _, err := f.Write(batch); err != nil {
		t.Fatal(err)
	}
	if m, err := syscall.Mmap(int(f.Fd()), 0, len(batch), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED); err == nil {
		syscall.Munmap(m)
		t.Fatal("a batch being written was mapped writable: its writer could change it after publication")
	}
	_, try := startHolder(t, f)
	if err := f.Close(); err != nil {
		t.Fatalf("the writer's close: %v", err)
	}
	if next := readFile(t, filepath.Join(d.dir, "ingest", "next")); next != "1\n" {
		t.Fatalf("next is %q: the writer's close did not publish while a child held a copy", next)
	}
	if err := os.Mkdir(filepath.Join(d.dir, "consumers", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	cf, err := os.Open(filepath.Join(d.dir, "consumers", "c", fs.BatchName(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	st, _ := cf.Stat()
	mapped, err := syscall.Mmap(int(cf.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mapped)
	before := append([]byte(nil), mapped...)
	usedBefore := bufferLine(t, d)
	if got := try(); got != "operation not permitted operation not permitted operation not permitted" {
		t.Fatalf("write, grow and truncate through the holder's copy after publication: %q, want EPERM each", got)
	}
	if !bytes.Equal(mapped, before) {
		t.Fatal("a consumer's mapping of a published batch changed")
	}
	if after := bufferLine(t, d); after != usedBefore {
		t.Fatalf("the buffer's count moved: %q, then %q", usedBefore, after)
	}
}

// bufferLine is status's buffer line.
func bufferLine(t *testing.T, d *mountProc) string {
	t.Helper()
	return regexp.MustCompile(`(?m)^buffer: .*$`).FindString(readFile(t, filepath.Join(d.dir, "status")))
}

// TestAWriterIsBoundedByTheBufferAsItWrites: the bytes of a batch being
// written count against --buffer as they come, status shows them and
// who writes, and the write that would take the batch past the buffer
// fails with EFBIG, not the close after it has taken the memory.
func TestAWriterIsBoundedByTheBufferAsItWrites(t *testing.T) {
	d := startDaemon(t, "--ingest", "--buffer", "4MiB")
	f := createBatch(t, d, 0)
	defer f.Close()
	chunk := bytes.Repeat([]byte{7}, 1<<20)
	for range 3 {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	st := readFile(t, filepath.Join(d.dir, "status"))
	if !strings.Contains(st, "3.0 MiB being written") || !regexp.MustCompile(`(?m)^state: writing 000000 since \S+, 3\.0 MiB written$`).MatchString(st) {
		t.Fatalf("status does not show the batch being written:\n%s", st)
	}
	if ist := readFile(t, filepath.Join(d.dir, "ingest", "status")); !strings.Contains(ist, "writing: 000000 since ") {
		t.Fatalf("ingest/status does not show the batch being written:\n%s", ist)
	}
	if _, err := f.Write(chunk); err != nil { // exactly the buffer
		t.Fatal(err)
	}
	var errno syscall.Errno
	if _, err := f.Write(chunk[:1]); !errors.As(err, &errno) || errno != syscall.EFBIG {
		t.Fatalf("the write past a 4 MiB buffer: %v, want EFBIG", err)
	}
	if err := f.Truncate(5 << 20); !errors.As(err, &errno) || errno != syscall.EFBIG {
		t.Fatalf("a truncation past the buffer: %v, want EFBIG", err)
	}
	if st := bufferLine(t, d); !strings.Contains(st, "4.0 MiB being written") {
		t.Fatalf("status after the refused write: %s", st)
	}
}

// readWithin reads path in a goroutine and fails the test if that takes
// longer than a minute (a read that nothing will ever end).
func readWithin(t *testing.T, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(path)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("reading %s hangs", path)
		return nil
	}
}

// TestNoSamplesEndsInAnError: when every sample of the data is skipped,
// under ingest's ordered mode and under the built-in pipeline, a
// consumer's read fails with ENODATA, status says why, and no handler
// panics; with one epoch and with two.
func TestNoSamplesEndsInAnError(t *testing.T) {
	t.Parallel() // see parallelTests
	junk := t.TempDir()
	for _, class := range []string{"a", "b"} {
		os.Mkdir(filepath.Join(junk, class), 0o755)
		for i := range 3 {
			if err := os.WriteFile(filepath.Join(junk, class, fmt.Sprintf("%d.jpg", i)), []byte("not a JPEG at all"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, epochs := range []string{"1", "2"} {
		t.Run("ingest/epochs="+epochs, func(t *testing.T) {
			d := startDaemon(t, "--ingest", "--samples", "20", "--epochs", epochs, "--batch-size", "4", "--max-skipped", "100%")
			if err := os.Mkdir(filepath.Join(d.dir, "consumers", "c"), 0o755); err != nil {
				t.Fatal(err)
			}
			order := strings.Fields(readFile(t, filepath.Join(d.dir, "ingest", "order")))
			if err := os.WriteFile(filepath.Join(d.dir, "ingest", "skip"), []byte(strings.Join(order[4:], " ")+"\n"), 0o200); err != nil {
				t.Fatal(err)
			}
			checkNoSamples(t, d, filepath.Join(d.dir, "consumers", "c", fs.BatchName(0)))
			if _, err := os.ReadFile(filepath.Join(d.dir, "ingest", "order")); !errors.Is(err, syscall.ENODATA) {
				t.Fatalf("ingest/order after every sample was skipped: %v, want ENODATA", err)
			}
			d.stopFailed(t)
		})
		t.Run("folder/epochs="+epochs, func(t *testing.T) {
			d := startDaemon(t, "--source", junk, "--epochs", epochs, "--batch-size", "2", "--image-size", "16", "--max-skipped", "100%")
			if err := os.Mkdir(filepath.Join(d.dir, "consumers", "c"), 0o755); err != nil {
				t.Fatal(err)
			}
			checkNoSamples(t, d, filepath.Join(d.dir, "consumers", "c", fs.BatchName(0)))
			if st := readFile(t, filepath.Join(d.dir, "status")); !strings.Contains(st, "skipped inputs: 6\n") {
				t.Fatalf("status does not count the 6 skips:\n%s", st)
			}
			d.stopFailed(t)
		})
	}
}

// checkNoSamples: reading batch fails with ENODATA, and status says the
// producer failed for want of samples.
func checkNoSamples(t *testing.T, d *mountProc, batch string) {
	t.Helper()
	if err := readWithin(t, batch); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("reading %s when every sample was skipped: %v, want ENODATA", filepath.Base(batch), err)
	}
	if st := readFile(t, filepath.Join(d.dir, "status")); !regexp.MustCompile(`(?m)^state: failed: .*every sample of the dataset was skipped`).MatchString(st) {
		t.Fatalf("status does not say why nothing comes:\n%s", st)
	}
	if state := readFile(t, filepath.Join(d.dir, "state")); state != "failed\n" {
		t.Fatalf("state %q, want failed", state)
	}
}

// stopFailed: the mount of a failed producer stays until SIGTERM, then
// exits 1 saying why, leaving no mount.
func (d *mountProc) stopFailed(t *testing.T) {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	var exit *exec.ExitError
	if err := <-d.done; !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(d.stderr.String(), "every sample of the dataset was skipped") {
		t.Fatalf("exit after SIGTERM of a failed producer's mount: %v, want 1 saying why; stderr:\n%s", err, d.stderr)
	}
	d.done <- nil // for the cleanup
	if fusetest.Mounted(t, d.dir) {
		t.Fatal("mount left behind")
	}
	if strings.Contains(d.stderr.String(), "panic") {
		t.Fatalf("a handler panicked:\n%s", d.stderr)
	}
}

// TestSIGHUPUnmountsCleanly: a daemon whose terminal goes away (SIGHUP)
// unmounts and exits 0, as on SIGTERM, leaving no dead mount behind.
func TestSIGHUPUnmountsCleanly(t *testing.T) {
	d := startDaemon(t, "--source", "synthetic:8", "--batch-size", "4", "--image-size", "16")
	d.stopWith(t, syscall.SIGHUP)
}
