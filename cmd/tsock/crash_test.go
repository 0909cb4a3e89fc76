package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// TestKilledConsumerIsEvicted: a consumer killed with SIGKILL while it
// maps a batch must not stall the others for more than the timeout; they
// finish with exact epochs, and the dead one's directory says evicted.
func TestKilledConsumerIsEvicted(t *testing.T) {
	src := producertest.Folder(t, 40, 4)
	folder, err := source.Open(context.Background(), src, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	buffer := fmt.Sprint(3 * (batchfile.DataStart + 8*(16+3*32*32)))
	d := startDaemon(t, "--source", src, "--batch-size", "8", "--image-size", "32", "--epochs", "2",
		"--buffer", buffer, "--consumer-timeout", "1s")
	victimDir := filepath.Join(d.dir, "consumers", "victim")
	if err := os.Mkdir(victimDir, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := startVictim(t, filepath.Join(victimDir, fs.BatchName(0)))
	survivor, copies := consume(t, d, "survivor")
	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	victim.Wait()
	if err := survivor.Wait(); err != nil {
		t.Fatalf("survivor: %v", err)
	}
	batches, _ := readCopies(t, copies)
	want := producertest.Stream{Good: producertest.All(folder.Len()), Label: folder.Label, BatchSize: 8, Epochs: 2}
	if err := want.Check(batches); err != nil {
		t.Fatalf("survivor: %v", err)
	}
	status, err := os.ReadFile(filepath.Join(victimDir, "status"))
	if err != nil || !strings.Contains(string(status), "state: evicted: ") {
		t.Fatalf("victim status: %v\n%s", err, status)
	}
	// Programs read the one-word files, not the prose.
	for path, want := range map[string]string{filepath.Join(victimDir, "state"): "evicted\n",
		filepath.Join(d.dir, "consumers", "survivor", "state"): "done\n"} {
		if got := readFile(t, path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(victimDir, fs.BatchName(5))); !errors.Is(err, syscall.EIO) {
		t.Fatalf("lookup in an evicted consumer: %v, want EIO", err)
	}
	metrics, _ := os.ReadFile(filepath.Join(d.dir, "metrics"))
	for _, series := range []string{`tsock_consumer_evicted{consumer="victim"} 1`, `tsock_consumer_done{consumer="survivor"} 1`} {
		if !strings.Contains(string(metrics), series) {
			t.Errorf("metrics lack %s:\n%s", series, metrics)
		}
	}
	if err := syscall.Rmdir(victimDir); err != nil {
		t.Fatalf("rmdir evicted consumer: %v", err)
	}
	d.stop(t)
}

// startVictim starts a process that maps file (its open blocks until the
// batch exists) and returns once it has: it holds the batch until killed.
func startVictim(t *testing.T, file string) *exec.Cmd {
	t.Helper()
	victim := exec.Command(os.Args[0], "-test.run=^$")
	victim.Env = append(os.Environ(), "TSOCK_TEST_VICTIM="+file)
	out, err := victim.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := victim.StdinPipe() // kept open: the victim waits on it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close() })
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.HasPrefix(line, "mapped") {
		t.Fatalf("victim did not map %s: %q %v", file, line, err)
	}
	return victim
}

// TestKilledDaemonLeavesNoBatchMount: a daemon killed with SIGKILL while
// it holds batches leaves no tmpfs mounted and no directory in its
// TMPDIR; only its FUSE mount stays, disconnected, as the kernel keeps
// every FUSE mount until umount (the cleanup's).
func TestKilledDaemonLeavesNoBatchMount(t *testing.T) {
	tmp := t.TempDir()
	d := startDaemonEnv(t, []string{"TMPDIR=" + tmp}, "--ingest", "--buffer", "1MiB")
	if err := publish(d, 0, sampleBatch(t, nil, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if st := readFile(t, filepath.Join(d.dir, "status")); !strings.Contains(st, "daemon writes into tmpfs") {
		t.Fatalf("the batches are not on tsock's tmpfs:\n%s", st)
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := <-d.done
	d.done <- err // for the cleanup
	info, rerr := os.ReadFile("/proc/self/mountinfo")
	if rerr != nil {
		t.Fatal(rerr)
	}
	for _, line := range strings.Split(string(info), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], tmp) {
			t.Errorf("mounted after the daemon was killed: %s", line)
		}
	}
	left, _ := os.ReadDir(tmp)
	for _, e := range left {
		t.Errorf("left in the daemon's TMPDIR: %s", e.Name())
	}
}

// TestShutdownIsNeverTheEndOfData: readers blocked in open() when the
// daemon gets SIGTERM fail with an error, never the ENOENT that says a
// consumer's stream is complete; the Python client raises.
func TestShutdownIsNeverTheEndOfData(t *testing.T) {
	t.Parallel() // see parallelTests
	one := batchfile.DataStart + 4*(16+3*32*32)
	d := startDaemon(t, "--source", "synthetic:100", "--batch-size", "4", "--image-size", "32", "--epochs", "1",
		"--buffer", fmt.Sprint(one+one/2))
	for _, name := range []string{"holder", "go"} {
		if err := os.Mkdir(filepath.Join(d.dir, "consumers", name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// holder keeps batch 0 open, so the producer waits for room and batch
	// 1 never comes: readers of it block in open().
	held, err := os.Open(filepath.Join(d.dir, "consumers", "holder", fs.BatchName(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	blocked := make(chan error, 1)
	go func() {
		f, err := os.Open(filepath.Join(d.dir, "consumers", "go", fs.BatchName(1)))
		if err == nil {
			f.Close()
		}
		blocked <- err
	}()
	py := exec.Command(installedPython(t), "-c", `
import sys, tsock
c = tsock.Consumer(sys.argv[1], name="py")
n = 0
try:
    for b in c:
        n += 1
        b = None
except tsock.TsockError as e:
    print("raised:", e); sys.exit(0)
print("the stream ended after", n, "batches"); sys.exit(1)`, d.dir)
	out := &strings.Builder{}
	py.Stdout, py.Stderr = out, out
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, "both readers are blocked on batch 1", func() bool {
		st := readFile(t, filepath.Join(d.dir, "status"))
		py, err := os.ReadFile(filepath.Join(d.dir, "consumers", "py", "status"))
		return err == nil && strings.Contains(st, "buffer full") && strings.Contains(string(py), "state: waiting") &&
			strings.Contains(readFile(t, filepath.Join(d.dir, "consumers", "go", "status")), "state: waiting")
	})
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-blocked; err == nil || errors.Is(err, syscall.ENOENT) {
		t.Errorf("a reader blocked at shutdown got %v, want an error other than ENOENT", err)
	}
	if err := py.Wait(); err != nil {
		t.Errorf("the Python client did not raise: %v\n%s", err, out)
	}
}

// TestFileNamesCannotForgeStatus: a source file named with a newline and
// a fake state line, and one whose name is not UTF-8, are skipped; status
// stays one line per key, valid UTF-8, and the Python client reads it.
func TestFileNamesCannotForgeStatus(t *testing.T) {
	t.Parallel() // see parallelTests
	src := producertest.Folder(t, 8, 2)
	class := filepath.Join(src, "class000")
	for _, name := range []string{"x\nstate: failed: forged.jpg", "\xff\xfe-latin1.jpg"} {
		if err := os.WriteFile(filepath.Join(class, name), []byte("not an image"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, "--source", src, "--batch-size", "4", "--image-size", "32", "--epochs", "1", "--max-skipped", "100%")
	if err := os.Mkdir(filepath.Join(d.dir, "consumers", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); ; i++ {
		data, err := os.ReadFile(filepath.Join(d.dir, "consumers", "c", fs.BatchName(i)))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil || len(data) == 0 {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	st := readFile(t, filepath.Join(d.dir, "status"))
	if !utf8.ValidString(st) {
		t.Errorf("status is not UTF-8:\n%q", st)
	}
	if strings.Count(st, "\nstate: ") != 1 || strings.Contains(st, "\nstate: failed") {
		t.Errorf("status has a forged state line:\n%s", st)
	}
	if state := readFile(t, filepath.Join(d.dir, "state")); state == "failed\n" || strings.Count(state, "\n") != 1 {
		t.Errorf("state %q: a file name forged it", state)
	}
	if !strings.Contains(st, "skipped inputs: 2") || !strings.Contains(st, `x\nstate: failed: forged.jpg`) || !strings.Contains(st, `\xff\xfe-latin1.jpg`) {
		t.Errorf("status does not name both skipped files, escaped:\n%s", st)
	}
	out, err := exec.Command(installedPython(t), "-c", `import sys, tsock
print(tsock.status.read(sys.argv[1])["state"])`, d.dir).CombinedOutput()
	if err != nil || strings.HasPrefix(string(out), "failed") {
		t.Errorf("the Python client read state %q (%v)", out, err)
	}
	d.stop(t)
}

// An open far ahead of a consumer's position, with a full buffer of
// batches only it can free, waited forever: every other consumer stalled
// and its rmdir hung in uninterruptible sleep. After --consumer-timeout
// the open fails with EDEADLK, and rmdir goes through.
func TestAnOpenFarAheadFailsInsteadOfHanging(t *testing.T) {
	batch := batchfile.DataStart + 8*(16+3*16*16)
	d := startDaemon(t, "--source", "synthetic:400", "--batch-size", "8", "--image-size", "16",
		"--buffer", fmt.Sprint(3*batch), "--consumer-timeout", "1s")
	dir := filepath.Join(d.dir, "consumers", "greedy")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		f, err := os.Open(filepath.Join(dir, fs.BatchName(20)))
		if err == nil {
			f.Close()
		}
		opened <- err
	}()
	var err error
	select {
	case err = <-opened:
	case <-time.After(60 * time.Second): // a bound for the failure
		t.Fatal("the open far ahead still waits after 60s")
	}
	if !errors.Is(err, syscall.EDEADLK) {
		t.Fatalf("open far ahead: %v, want EDEADLK", err)
	}
	if state := readFile(t, filepath.Join(dir, "state")); state != "reading\n" && state != "waiting\n" {
		t.Fatalf("greedy is %q after its broken wait: want it kept", state)
	}
	removed := make(chan error, 1)
	go func() { removed <- os.Remove(dir) }()
	select {
	case err = <-removed:
	case <-time.After(60 * time.Second):
		t.Fatal("rmdir hangs")
	}
	if err != nil {
		t.Fatalf("rmdir: %v", err)
	}
	d.stop(t)
}

// A mount nobody reads held its whole buffer for good; status says so, and
// --idle-exit unmounts and exits once no consumer has come for that long.
func TestIdleMountSaysSoAndExits(t *testing.T) {
	t.Parallel() // see parallelTests
	d := startDaemon(t, "--source", "synthetic:40", "--batch-size", "8", "--image-size", "16", "--idle-exit", "2s")
	if st := readFile(t, filepath.Join(d.dir, "status")); !strings.Contains(st, "unwatched: no consumer for ") ||
		!strings.Contains(st, "(--idle-exit)") {
		t.Fatalf("status does not say the mount is unwatched:\n%s", st)
	}
	select {
	case err := <-d.done:
		d.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("the idle daemon exited with %v\n%s", err, d.stderr)
		}
	case <-time.After(60 * time.Second): // a bound for the failure
		t.Fatal("the idle daemon is still running after 60s with --idle-exit 2s")
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == d.dir {
			t.Fatalf("still mounted after the idle exit: %s", line)
		}
	}
}

// metric is one series' value in MOUNTPOINT/metrics, -1 where absent.
func metric(t *testing.T, d *mountProc, series string) int64 {
	t.Helper()
	for _, line := range strings.Split(readFile(t, filepath.Join(d.dir, "metrics")), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", line, err)
			}
			return int64(f)
		}
	}
	return -1
}

// With passthrough, a mapping outlives the close that released its batch
// (np.memmap maps and closes at once): a reader that kept every batch
// mapped pinned 9.4x --buffer while status showed the buffer within its
// limit. That memory now counts against the buffer: the producer waits
// for it, the reader's next open fails with EDEADLK instead of hanging,
// status shows it, and reading resumes once the mappings go.
func TestMappingsAfterCloseCountAgainstTheBuffer(t *testing.T) {
	batch := batchfile.DataStart + 8*(16+3*32*32)
	limit := 4 * int64(batch)
	d := startDaemon(t, "--source", "synthetic:400", "--batch-size", "8", "--image-size", "32",
		"--buffer", fmt.Sprint(limit), "--consumer-timeout", "1s", "--storage", "tmpfs")
	dir := filepath.Join(d.dir, "consumers", "hoarder")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var maps [][]byte
	defer func() {
		for _, m := range maps {
			syscall.Munmap(m)
		}
	}()
	var err error
	for len(maps) < 50 {
		var m []byte
		if m, err = mapAndClose(filepath.Join(dir, fs.BatchName(uint64(len(maps))))); err != nil {
			break
		}
		maps = append(maps, m)
	}
	if !errors.Is(err, syscall.EDEADLK) {
		t.Fatalf("kept %d batches mapped (%d bytes, --buffer %d); the next open: %v, want EDEADLK", len(maps), len(maps)*batch, limit, err)
	}
	used := metric(t, d, "tsock_buffer_used_bytes")
	mapped := metric(t, d, "tsock_buffer_mapped_after_release_bytes")
	if mapped <= 0 || used+mapped > limit+int64(batch) {
		t.Fatalf("%d batches mapped: %d bytes held and %d still mapped after release, --buffer %d", len(maps), used, mapped, limit)
	}
	if st := readFile(t, filepath.Join(dir, "status")); !strings.Contains(st, "still mapped") {
		t.Errorf("the consumer's status does not say why its open failed:\n%s", st)
	}
	for _, m := range maps {
		if err := syscall.Munmap(m); err != nil {
			t.Fatal(err)
		}
	}
	n := len(maps)
	maps = nil
	if _, err := mapAndClose(filepath.Join(dir, fs.BatchName(uint64(n)))); err != nil {
		t.Fatalf("batch %d once the mappings went: %v", n, err)
	}
	d.stop(t)
}

// mapAndClose maps a whole file and closes it, as np.memmap does.
func mapAndClose(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	_ = m[len(m)-1] // fault it in
	return m, nil
}
