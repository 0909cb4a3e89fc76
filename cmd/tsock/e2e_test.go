package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs"
	"github.com/tsock/tsock/fs/fusetest"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// TestMain doubles as a consumer process: with TSOCK_TEST_CONSUMER=DIR
// and TSOCK_TEST_OUT=OUT it copies DIR's batches, in order, to OUT until
// ENOENT. Any other error exits 1. With TSOCK_TEST_JOIN set it makes DIR
// first; with TSOCK_TEST_GO=FILE too, it then writes OUT/.joined and
// reads only once FILE exists (every consumer joined before any reads,
// so that each reads from the first batch).
//
// With TSOCK_TEST_VICTIM=FILE it maps FILE, says "mapped" and waits to be
// killed.
//
// With TSOCK_TEST_HOLDER=1 it holds the descriptor it inherits as fd 3
// (a copy of an ingest writer's): see holderProcess.
func TestMain(m *testing.M) {
	if dir := os.Getenv("TSOCK_TEST_CONSUMER"); dir != "" {
		os.Exit(consumerProcess(dir, os.Getenv("TSOCK_TEST_OUT")))
	}
	if file := os.Getenv("TSOCK_TEST_VICTIM"); file != "" {
		os.Exit(victimProcess(file))
	}
	if os.Getenv("TSOCK_TEST_HOLDER") != "" {
		os.Exit(holderProcess())
	}
	// Mounts of tar shards keep their index in the user's cache directory
	// by default: the tests' go to one of their own, removed after. The
	// go command the tests run (tsockBinary's race build) keeps Go's own
	// build cache, which lives there too by default: without it, each run
	// built the binary from nothing (85 s here, 187 s beside the fuzzers).
	if os.Getenv("GOCACHE") == "" {
		if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
			os.Setenv("GOCACHE", strings.TrimSpace(string(out)))
		}
	}
	cache, err := os.MkdirTemp("", "tsock-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CACHE_HOME", cache)
	code := m.Run()
	os.RemoveAll(cache)
	if venvDir != "" {
		os.RemoveAll(venvDir)
	}
	os.Exit(code)
}

func victimProcess(file string) int {
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "victim:", err)
		return 1
	}
	st, _ := f.Stat()
	m, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		fmt.Fprintln(os.Stderr, "victim:", err)
		return 1
	}
	fmt.Println("mapped", m[0])
	io.Copy(io.Discard, os.Stdin) // until killed
	return 0
}

func consumerProcess(dir, out string) int {
	if os.Getenv("TSOCK_TEST_JOIN") != "" { // it joins itself (a mount other users cannot enter)
		if err := os.Mkdir(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "consumer:", err)
			return 1
		}
	}
	if gofile := os.Getenv("TSOCK_TEST_GO"); gofile != "" {
		if err := os.WriteFile(filepath.Join(out, ".joined"), nil, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "consumer:", err)
			return 1
		}
		if err := waittest.Wait("the test says go", func() bool { _, err := os.Stat(gofile); return err == nil }); err != nil {
			fmt.Fprintln(os.Stderr, "consumer:", err)
			return 1
		}
	}
	read := os.ReadFile
	if os.Getenv("TSOCK_TEST_MMAP") != "" {
		read = readMapped
	}
	for i := uint64(0); ; i++ {
		b, err := read(filepath.Join(dir, fs.BatchName(i)))
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(out, fs.BatchName(i)), b, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "consumer:", err)
			return 1
		}
	}
}

// readMapped reads a file through a read-only shared mapping, as the
// Python client reads batches.
func readMapped(path string) ([]byte, error) {
	m, err := mapAndClose(path)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	defer syscall.Munmap(m)
	return bytes.Clone(m), nil
}

// builtOnce is something a test run builds once (the binary, a venv),
// for every test that needs it.
type builtOnce struct {
	once sync.Once
	path string
	err  error
}

// get builds with build the first time, and returns what it built.
func (b *builtOnce) get(t *testing.T, build func() (string, error)) string {
	t.Helper()
	b.once.Do(func() { b.path, b.err = build() })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

var tsockBuild, plainBuild builtOnce

// tsockBinary builds cmd/tsock once per test run, with the race
// detector: the daemons of the mount tests are checked as the in-process
// tests are.
func tsockBinary(t *testing.T) string {
	t.Helper()
	return tsockBuild.get(t, func() (string, error) { return buildTsock("-race") })
}

// plainTsockBinary builds cmd/tsock once per test run without the race
// detector, for the tests whose subject is not the daemon's concurrency
// but its scale or another program: the Python client's suite and the
// fleet of 200 consumers. Race-built, the daemon spent most of their
// time in the detector (the Python suite 204 s and 174 s of CPU, plain
// 84 s and 127; the fleet of 200 and the subset bounds 49 s and 92, plain
// 21 and 36), and the same paths run race-built in the smaller fleet, the
// other mount tests and the in-process tests.
func plainTsockBinary(t *testing.T) string {
	t.Helper()
	return plainBuild.get(t, func() (string, error) { return buildTsock() })
}

// buildTsock builds cmd/tsock into a new temp dir with go build's flags.
func buildTsock(flags ...string) (string, error) {
	dir, err := os.MkdirTemp("", "tsock-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "tsock")
	args := append(append([]string{"build"}, flags...), "-o", bin, ".")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", strings.Join(flags, " "), err, out)
	}
	return bin, nil
}

// mountProc is a running "tsock mount", a process of the binary under test.
type mountProc struct {
	cmd    *exec.Cmd
	dir    string
	stderr *bytes.Buffer
	done   chan error
}

// startDaemon runs tsock mount DIR args… and waits for its ready line.
func startDaemon(t *testing.T, args ...string) *mountProc {
	t.Helper()
	return startDaemonEnv(t, nil, args...)
}

// startDaemonEnv is startDaemon with extra environment variables.
func startDaemonEnv(t *testing.T, env []string, args ...string) *mountProc {
	t.Helper()
	return startDaemonOf(t, tsockBinary(t), env, args...)
}

// startPlainDaemon is startDaemon with the binary built without the
// race detector (plainTsockBinary says which tests, and why).
func startPlainDaemon(t *testing.T, args ...string) *mountProc {
	t.Helper()
	return startDaemonOf(t, plainTsockBinary(t), nil, args...)
}

// startDaemonOf runs bin's tsock mount DIR args… with extra environment
// variables and waits for its ready line.
func startDaemonOf(t *testing.T, bin string, env []string, args ...string) *mountProc {
	t.Helper()
	fusetest.Need(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, append([]string{"mount", dir}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return runDaemon(t, dir, cmd)
}

// runDaemon starts cmd, a tsock mount at dir, and waits for its ready
// line; Cleanup stops it and leaves no mount.
func runDaemon(t *testing.T, dir string, cmd *exec.Cmd) *mountProc {
	t.Helper()
	d := &mountProc{cmd: cmd, dir: dir, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = d.stderr
	if err := startDying(d.cmd, d.done); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			d.cmd.Process.Kill()
		}
		syscall.Unmount(d.dir, syscall.MNT_DETACH) // only if the daemon failed to
	})
	select {
	case line := <-ready:
		if !strings.HasPrefix(line, "tsock: mounted ") {
			err := <-d.done // exited: its stderr is written whole
			d.done <- err
			t.Fatalf("no ready line: %q (%v)\nstderr: %s", line, err, d.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("daemon not ready in 60s; stderr: %s", d.stderr)
	}
	return d
}

// startDying starts cmd so that it gets SIGTERM when the test binary
// dies (go test's timeout panics and runs no Cleanup: its daemons must
// unmount by themselves), and only then; cmd.Wait's result is sent on
// done. The kernel sends the death signal (Pdeathsig) when the thread
// that forked the child ends, not the process, and Go ends a thread
// whenever a goroutine that locked it returns (runtime.LockOSThread, as
// the tests' readers do): a daemon forked on a thread a reader locked
// later got SIGTERM in the middle of its test (an ESHUTDOWN in
// TestGroupThroughTheMount on a loaded machine). So the fork is made on
// a goroutine that keeps its thread locked until the child has exited.
func startDying(cmd *exec.Cmd, done chan<- error) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread() // after Wait: the thread lives on
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		done <- cmd.Wait()
	}()
	return <-started
}

// stop sends SIGTERM and checks a clean exit and unmount.
func (d *mountProc) stop(t *testing.T) {
	t.Helper()
	d.stopWith(t, syscall.SIGTERM)
}

// stopWith sends sig and checks a clean exit and unmount.
func (d *mountProc) stopWith(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.done:
		d.done <- err // for Cleanup
		if err != nil {
			t.Fatalf("daemon exit after %v: %v\nstderr: %s", sig, err, d.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("daemon did not exit in 30s after %v", sig)
	}
	if fusetest.Mounted(t, d.dir) {
		t.Fatalf("mount left behind after %v", sig)
	}
}

// consume starts a consumer process that copies NAME's batches to a dir.
func consume(t *testing.T, d *mountProc, name string) (*exec.Cmd, string) {
	t.Helper()
	return consumeSized(t, d, name, 0)
}

// consumeSized is consume with the consumer's own batch size (0: the
// producer's), written to its batch_size file before it reads.
func consumeSized(t *testing.T, d *mountProc, name string, batchSize int) (*exec.Cmd, string) {
	t.Helper()
	knobs := map[string]string{}
	if batchSize > 0 {
		knobs["batch_size"] = fmt.Sprintln(batchSize)
	}
	return consumeWith(t, d, name, knobs)
}

// consumeWith is consume with control files (batch_size, subset) written
// before it reads.
func consumeWith(t *testing.T, d *mountProc, name string, knobs map[string]string) (*exec.Cmd, string) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(d.dir, "consumers", name), 0o755); err != nil {
		t.Fatal(err)
	}
	for knob, value := range knobs {
		if err := os.WriteFile(filepath.Join(d.dir, "consumers", name, knob), []byte(value), 0o644); err != nil {
			t.Fatalf("%s of %s: %v", knob, name, err)
		}
	}
	return startReader(t, d, name)
}

// startReader runs a process that copies out consumer name's batches, in
// order, to the end.
func startReader(t *testing.T, d *mountProc, name string) (*exec.Cmd, string) {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TSOCK_TEST_CONSUMER="+filepath.Join(d.dir, "consumers", name), "TSOCK_TEST_OUT="+out)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// readCopies parses the batches a consumer process copied out.
func readCopies(t *testing.T, dir string) ([]*batchfile.Batch, [][]byte) {
	t.Helper()
	var batches []*batchfile.Batch
	var raw [][]byte
	for i := uint64(0); ; i++ {
		b, err := os.ReadFile(filepath.Join(dir, fs.BatchName(i)))
		if errors.Is(err, os.ErrNotExist) {
			return batches, raw
		}
		if err != nil {
			t.Fatal(err)
		}
		pb, err := batchfile.ParseBatch(b)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		batches, raw = append(batches, pb), append(raw, b)
	}
}

// Every data path and decoder gives the same exact epochs, and status
// says which one is live.
func TestEndToEndThreeConsumersTwoEpochs(t *testing.T) {
	t.Parallel() // see parallelTests
	for _, path := range []struct {
		flags  []string
		status []string // what status must say
	}{
		{[]string{"--storage", "tmpfs", "--decoder", "turbo", "--cache", "64MiB"},
			[]string{"data path: passthrough from tmpfs huge=", "decoder: libjpeg-turbo", "raw cache: "}},
		{[]string{"--storage", "memfd", "--decoder", "turbo"},
			[]string{"data path: passthrough from memfd (reads and mmaps never enter the daemon)"}},
		{[]string{"--storage", "memfd", "--passthrough", "off", "--decoder", "go"},
			[]string{"data path: daemon reads from memfd (each batch read ahead whole once a consumer looks it up, in 512 KiB requests", "decoder: Go image/jpeg (by request)"}},
	} {
		t.Run(strings.Join(path.flags, " "), func(t *testing.T) { endToEnd(t, path.flags, path.status) })
	}
}

func endToEnd(t *testing.T, dataPath, wantStatus []string) {
	src := producertest.Folder(t, 45, 4)
	bad, _ := producertest.BadFiles(t, src, "class002")
	folder, err := source.Open(context.Background(), src, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const batch = 8
	// A buffer of three batches: the producer must wait for the readers.
	buffer := fmt.Sprint(3 * (batchfile.DataStart + batch*(16+3*32*32)))
	d := startDaemon(t, append([]string{"--source", src, "--batch-size", "8", "--image-size", "32",
		"--epochs", "2", "--buffer", buffer, "--workers", "2", "--max-skipped", "100%"}, dataPath...)...)
	var cmds []*exec.Cmd
	var outs []string
	for _, name := range []string{"trial-1", "trial-2", "trial-3"} {
		cmd, out := consume(t, d, name)
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("consumer %d: %v", i, err)
		}
	}
	want := producertest.Stream{Good: producertest.Without(folder, bad), Label: folder.Label, BatchSize: batch, Epochs: 2}
	var first [][]byte
	for i, out := range outs {
		batches, raw := readCopies(t, out)
		if err := want.Check(batches); err != nil {
			t.Fatalf("consumer %d: %v", i, err)
		}
		if i == 0 {
			first = raw
			continue
		}
		if len(raw) != len(first) {
			t.Fatalf("consumer %d read %d batches, consumer 0 read %d", i, len(raw), len(first))
		}
		for k := range raw {
			if !bytes.Equal(raw[k], first[k]) {
				t.Fatalf("consumer %d's batch %d differs from consumer 0's", i, k)
			}
		}
	}
	status, err := os.ReadFile(filepath.Join(d.dir, "status"))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(dataPath, "--cache") { // the first epoch read every file, the second only memory
		wantStatus = append(wantStatus, fmt.Sprintf("(%d hits, %d misses)", folder.Len()-len(bad), folder.Len()))
	}
	for _, line := range append([]string{"state: idle", fmt.Sprintf("skipped inputs: %d", len(bad)), "trial-3: "}, wantStatus...) {
		if !strings.Contains(string(status), line) {
			t.Errorf("status lacks %q:\n%s", line, status)
		}
	}
	if state := readFile(t, filepath.Join(d.dir, "state")); state != "idle\n" {
		t.Errorf("state %q, want idle", state)
	}
	d.stop(t)
}

func TestMountTwiceFails(t *testing.T) {
	d := startDaemon(t, "--source", "synthetic:20", "--batch-size", "4", "--image-size", "16")
	code, out := runCLI(t, "mount", d.dir, "--source", "synthetic:20")
	if code != exitError || !strings.Contains(out, "already mounted") {
		t.Fatalf("second mount: exit %d, %q", code, out)
	}
	// The first mount is untouched.
	if _, err := os.Stat(filepath.Join(d.dir, "status")); err != nil {
		t.Fatal(err)
	}
	d.stop(t)
}

func TestUmountFromOutsideExits0(t *testing.T) {
	d := startDaemon(t, "--source", "synthetic:20", "--batch-size", "4", "--image-size", "16")
	if out, err := exec.Command("umount", d.dir).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			t.Fatalf("exit after umount: %v\n%s", err, d.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("daemon still running 30s after umount")
	}
}

// A mountpoint that is a symbolic link is refused, its target left as
// it is: a link planted in a shared directory must not make a daemon
// running as root mount over what it points to.
func TestMountNeverFollowsALink(t *testing.T) {
	target := t.TempDir()
	link := filepath.Join(t.TempDir(), "tsock-42.n1")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	// A mount that went ahead ends (unmounts) at the deadline, exit 0.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stdout, stderr, code := tsockRun(ctx, "mount", link, "--source", "synthetic:20")
	if code != exitError || !strings.Contains(stdout+stderr, "symbolic link") {
		t.Fatalf("a mount through a link: exit %d, %q", code, stdout+stderr)
	}
	if mounts, err := os.ReadFile("/proc/self/mounts"); err != nil || strings.Contains(string(mounts), target) {
		t.Fatalf("the link's target was mounted (%v)", err)
	}
}
