package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs/fusetest"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// TestWithoutRoot: a user who is not root mounts through fusermount3
// (setuid root, Debian's fuse3) where /dev/fuse is openable by all, as
// shared GPU boxes and HPC nodes make it. Passthrough needs CAP_SYS_ADMIN,
// so reads are served by the daemon, and status says so; two consumers
// read exact epochs, the same bytes; `fusermount3 -u` unmounts and tsock
// exits 0, leaving no mount. Where /dev/fuse is not openable, the mount
// exits 1 at once saying so.
func TestWithoutRoot(t *testing.T) {
	fusetest.NeedRoot(t, "root sets the stage: /dev/fuse's mode, a user's directories")
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Fatal("fusermount3 (Debian's fuse3, scripts/setup.sh installs it): ", err)
	}
	setDevFuse(t, 0o600)
	base := nobodysDirs(t, "mnt", "out1", "out2")
	mnt, out1, out2 := filepath.Join(base, "mnt"), filepath.Join(base, "out1"), filepath.Join(base, "out2")
	bin, self := copyExecutable(t, tsockBinary(t), base), copyExecutable(t, os.Args[0], base)

	refused := exec.Command(bin, "mount", mnt, "--source", "synthetic:40")
	refused.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	refused.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base}
	out, err := refused.CombinedOutput()
	if code := refused.ProcessState.ExitCode(); code != exitError || !strings.Contains(string(out), "/dev/fuse is not openable by uid 65534") {
		t.Fatalf("mount as uid %d, /dev/fuse 0600: exit %d (%v), %q; want exit %d naming /dev/fuse", nobody, code, err, out, exitError)
	}

	setDevFuse(t, 0o666)
	cmd := exec.Command(bin, "mount", mnt, "--source", "synthetic:40", "--batch-size", "8", "--image-size", "16", "--epochs", "2")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base}
	d := runDaemon(t, mnt, cmd)

	// Two consumers, as the same user (the mount is its owner's alone):
	// one by plain reads, one through mappings, as the Python client reads.
	var readers []*exec.Cmd
	for name, out := range map[string]string{"trial-1": out1, "trial-2": out2} {
		r := exec.Command(self, "-test.run=^$")
		r.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		r.Env = []string{"TSOCK_TEST_CONSUMER=" + filepath.Join(mnt, "consumers", name), "TSOCK_TEST_OUT=" + out, "TSOCK_TEST_JOIN=1",
			"TSOCK_TEST_GO=" + filepath.Join(base, "go")}
		if name == "trial-2" {
			r.Env = append(r.Env, "TSOCK_TEST_MMAP=1")
		}
		r.Stderr = os.Stderr
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		readers = append(readers, r)
	}
	// Both join before either reads: a consumer that joined after the
	// other had read batch 0 (and it was freed) starts at batch 1, a
	// stitched epoch of other bytes.
	waittest.Until(t, "both consumers joined", func() bool {
		_, e1 := os.Stat(filepath.Join(out1, ".joined"))
		_, e2 := os.Stat(filepath.Join(out2, ".joined"))
		return e1 == nil && e2 == nil
	})
	if err := os.WriteFile(filepath.Join(base, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, r := range readers {
		if err := r.Wait(); err != nil {
			t.Fatalf("a consumer as uid %d: %v", nobody, err)
		}
	}
	src, err := source.Open(context.Background(), "synthetic:40", source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := producertest.Stream{Good: producertest.All(40), Label: src.Label, BatchSize: 8, Epochs: 2}
	b1, raw1 := readCopies(t, out1)
	b2, raw2 := readCopies(t, out2)
	for _, batches := range [][]*batchfile.Batch{b1, b2} {
		if err := want.Check(batches); err != nil {
			t.Fatal(err)
		}
	}
	if len(raw1) != len(raw2) {
		t.Fatalf("the two consumers read %d and %d batches", len(raw1), len(raw2))
	}
	for k := range raw1 {
		if !bytes.Equal(raw1[k], raw2[k]) {
			t.Fatalf("batch %d differs between the two consumers", k)
		}
	}

	// Which read path is live: the mount's status file, and tsock status.
	status, ok := asUser(t, nobody, base, "cat mnt/status && "+bin+" status mnt")
	for _, line := range []string{
		"data path: daemon reads from tmpfs huge=advise in a user namespace (each batch read ahead whole once a consumer looks it up, in 128 KiB requests served in parallel",
		"passthrough off: kernel refused a backing file",
		"data path daemon reads from tmpfs huge=advise in a user namespace\n",
	} {
		if !ok || !strings.Contains(status, line) {
			t.Errorf("status as uid %d lacks %q:\n%s", nobody, line, status)
		}
	}
	// The filler opened batches through the user's own mount.
	if m := regexp.MustCompile(`the page cache its consumers share: (\d+) batches`).FindStringSubmatch(status); m == nil || m[1] == "0" {
		t.Errorf("status as uid %d: no batch read ahead by the daemon:\n%s", nobody, status)
	}
	// Every reply was spliced from a batch's file: a user's pipes hold them.
	if m := regexp.MustCompile(`(\S+ \S+) served so far, (\S+ \S+) of it spliced`).FindStringSubmatch(status); m == nil || m[1] != m[2] {
		t.Errorf("status as uid %d: not every byte served was spliced:\n%s", nobody, status)
	}

	if out, ok := asUser(t, nobody, base, "fusermount3 -u mnt"); !ok {
		t.Fatalf("fusermount3 -u as uid %d: %s", nobody, out)
	}
	select {
	case err := <-d.done:
		d.done <- err // for Cleanup
		if err != nil {
			t.Fatalf("tsock after fusermount3 -u: %v\nstderr: %s", err, d.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("tsock did not exit in 30 s after fusermount3 -u")
	}
	if fusetest.Mounted(t, mnt) {
		t.Fatal("mount left behind after fusermount3 -u")
	}
}

// nobodysDirs is a new directory every user reaches, holding dirs owned
// by user nobody.
func nobodysDirs(t *testing.T, dirs ...string) string {
	t.Helper()
	base := t.TempDir()
	reachable(t, base)
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Join(base, d), nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}

// setDevFuse sets /dev/fuse's mode for the test (0666: openable by every
// user, as an administrator makes it for users without root) and
// restores the mode it had at the end.
func setDevFuse(t *testing.T, mode os.FileMode) {
	t.Helper()
	st, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod("/dev/fuse", mode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Chmod("/dev/fuse", st.Mode().Perm()); err != nil {
			t.Errorf("restore /dev/fuse's mode %v: %v", st.Mode().Perm(), err)
		}
	})
}

// copyExecutable copies the program at path into dir, where every user
// may run it (a build's own directories are root's alone).
func copyExecutable(t *testing.T, path, dir string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return to
}

// TestWithoutRootAFailedSpliceFallsBackOnce: a user's daemon whose pipes
// can no longer be grown to hold a reply (pipe-max-size lowered under it
// to one page, as an administrator may) copies its replies instead: the
// consumer reads the exact epoch, the daemon says so once on its log
// (not a line per reply, as go-fuse would), and status counts only what
// was spliced and says why splicing is off.
func TestWithoutRootAFailedSpliceFallsBackOnce(t *testing.T) {
	fusetest.NeedRoot(t, "root sets /dev/fuse's mode and pipe-max-size, and runs the daemon as a user")
	setDevFuse(t, 0o666)
	was, err := os.ReadFile("/proc/sys/fs/pipe-max-size")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile("/proc/sys/fs/pipe-max-size", was, 0o644); err != nil {
			t.Errorf("restore pipe-max-size %s: %v", was, err)
		}
	})
	base := nobodysDirs(t, "mnt", "out")
	mnt, out := filepath.Join(base, "mnt"), filepath.Join(base, "out")
	bin := copyExecutable(t, tsockBinary(t), base)
	cmd := exec.Command(bin, "mount", mnt, "--source", "synthetic:40", "--batch-size", "8", "--image-size", "64", "--epochs", "1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base}
	d := runDaemon(t, mnt, cmd)
	// Mounted with 1 MiB pipes allowed (replies of 128 KiB spliced); no
	// reply yet, so no pipe grown: every one now fails to grow.
	if err := os.WriteFile("/proc/sys/fs/pipe-max-size", []byte("4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "mkdir mnt/consumers/c && for i in 0 1 2 3 4; do cp mnt/consumers/c/00000$i.safetensors out/; done && cat mnt/status"
	status, ok := asUser(t, nobody, base, script)
	if !ok {
		t.Fatalf("reading as uid %d: %s\nthe daemon: %s", nobody, status, d.stderr)
	}
	src, err := source.Open(context.Background(), "synthetic:40", source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	batches, _ := readCopies(t, out)
	if err := (producertest.Stream{Good: producertest.All(40), Label: src.Label, BatchSize: 8, Epochs: 1}).Check(batches); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(\S+ \S+) served so far, (\S+ \S+) of it spliced, splicing off since [0-9:]+: ([^)]*): replies copied`).FindStringSubmatch(status)
	if m == nil || m[1] == m[2] || !strings.Contains(m[3], "splice") {
		t.Fatalf("status as uid %d does not say splicing is off, or counts every byte served as spliced:\n%s", nobody, status)
	}
	// The daemon's log, once it has exited.
	if out, ok := asUser(t, nobody, base, "fusermount3 -u mnt"); !ok {
		t.Fatalf("fusermount3 -u as uid %d: %s", nobody, out)
	}
	select {
	case err := <-d.done:
		d.done <- err // for Cleanup
	case <-time.After(30 * time.Second):
		t.Fatalf("tsock did not exit in 30 s after fusermount3 -u")
	}
	if n := len(regexp.MustCompile(`(?m)^.*splic.*$`).FindAllString(d.stderr.String(), -1)); n != 1 {
		t.Fatalf("the daemon's log speaks of splicing in %d lines, want one:\n%s", n, d.stderr)
	}
}

// directReader is run as the daemon's user: it says its consumer c reads
// around FUSE (read_ahead 0; 2 is refused), then reads c's batches with
// the Python client, each mapped from the daemon's own file around FUSE
// (the batch's direct flag), the same bytes as a plain read through the
// mount. Batch 0 is held (its lease with it) while batches 1 to 4 are
// read, and its bytes never change; batch 1's file, opened by its direct
// path and kept past its lease, still holds batch 1's bytes once the
// buffer has turned over (batches 5 to 9 in new files; batch 5 read
// through the mount, TSOCK_DIRECT=0). It prints batch 1's direct path.
// A second consumer's client (a re-batched file, in a PID namespace of
// its own) falls back to the mount's file.
const directReader = `
import os, sys
sys.path.insert(0, sys.argv[1])
from tsock import batchfile
d = os.path.join(sys.argv[2], "consumers", "c")
os.mkdir(d)
try:
    with open(os.path.join(d, "read_ahead"), "wb", buffering=0) as f:
        f.write(b"2\n")
    raise AssertionError("read_ahead took 2")
except OSError as e:
    assert e.errno == 22, e
with open(os.path.join(d, "read_ahead"), "wb", buffering=0) as f:
    f.write(b"0\n")  # this reader reads around FUSE: nothing to read ahead
assert open(os.path.join(d, "read_ahead")).read() == "0\n"
path = lambda j: os.path.join(d, "%06d.safetensors" % j)
def plain(j):
    with open(path(j), "rb") as f:
        return f.read()
first = batchfile.load_batch(path(0))
assert first.direct, "batch 0 was not mapped around FUSE"
kept = {k: v.copy() for k, v in first.items()}
for j in range(1, 5):
    b = batchfile.load_batch(path(j))  # its lease, while the bytes are compared
    assert b.direct, "batch %d was not mapped around FUSE" % j
    fd = os.open(path(j), os.O_RDONLY)
    where = os.getxattr(fd, batchfile.DIRECT_XATTR).decode().split()[0]
    f = open(where, "rb")
    direct = f.read()
    mine = plain(j)
    assert direct == mine, "batch %d: the direct bytes differ from the mount's" % j
    if j == 1:
        held, held_bytes = f, mine  # kept open past its lease
        print(where)
    else:
        f.close()
    os.close(fd)
    del b
for k, v in first.items():
    assert (v == kept[k]).all(), "batch 0's %s changed while it was held" % k
del first, v  # its arrays: the mapping, and the lease with it
os.environ["TSOCK_DIRECT"] = "0"  # the fallback, by choice: the mount's file
b = batchfile.load_batch(path(5))
with open(path(5), "rb") as f:
    assert not b.direct and bytes(b["indices"].tobytes()) in f.read(), "TSOCK_DIRECT=0: not the mount's file"
del b
del os.environ["TSOCK_DIRECT"]
for j in range(6, 10):
    b = batchfile.load_batch(path(j))
    assert b.direct, "batch %d was not mapped around FUSE" % j
    del b
held.seek(0)
assert held.read() == held_bytes, "batch 1's file changed once its lease was gone"
`

// Without root the daemon keeps batches on a huge-page tmpfs of its own
// user namespace, and says so; a consumer whose reader reads around
// FUSE gets nothing read ahead; the Python client, as the daemon's user,
// maps each batch from the daemon's file (/proc/PID/fd/N, learned from
// the batch file's user.tsock.direct) rather than through FUSE: the same
// bytes as a read through the mount, a held batch unchanged while the
// buffer turns over, and another user may not open that path.
func TestWithoutRootReadsAroundFUSE(t *testing.T) {
	fusetest.NeedRoot(t, "root sets /dev/fuse's mode and runs the daemon and its reader as users")
	setDevFuse(t, 0o666)
	base := nobodysDirs(t, "mnt", "client")
	mnt := filepath.Join(base, "mnt")
	bin := copyExecutable(t, tsockBinary(t), base)
	client := filepath.Join(base, "client")
	copyClient(t, client)
	// 64 KiB: 6 batches of 8 images of 16 px (10 KiB each, in pages).
	cmd := exec.Command(bin, "mount", mnt, "--source", "synthetic:80", "--batch-size", "8", "--image-size", "16", "--epochs", "1",
		"--buffer", "64KiB")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base}
	d := runDaemon(t, mnt, cmd)
	if err := os.WriteFile(filepath.Join(base, "direct.py"), []byte(directReader), 0o644); err != nil {
		t.Fatal(err)
	}
	out, ok := asUser(t, nobody, base, "/usr/bin/python3 direct.py "+client+" "+mnt)
	if !ok {
		t.Fatalf("the client as uid %d: %s", nobody, out)
	}
	// A second consumer, joined once the first has read the epoch (its
	// file stitched: a re-batched one, which the daemon assembles and
	// offers no direct path for), read by a client in a PID namespace of
	// its own (its /proc names no daemon, or another process): the
	// client reads the mount's file.
	other := `
import os, sys
sys.path.insert(0, sys.argv[1])
from tsock import batchfile
d = os.path.join(sys.argv[2], "consumers", "c2")
os.mkdir(d)
p = os.path.join(d, "000000.safetensors")
b = batchfile.load_batch(p)
with open(p, "rb") as f:
    assert not b.direct and bytes(b["indices"].tobytes()) in f.read(), "another PID namespace: not the mount's file"
`
	if err := os.WriteFile(filepath.Join(base, "otherpid.py"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	pidns := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "setpriv", fmt.Sprintf("--reuid=%d", nobody), fmt.Sprintf("--regid=%d", nobody),
		"--clear-groups", "/usr/bin/python3", filepath.Join(base, "otherpid.py"), client, mnt)
	if out, err := pidns.CombinedOutput(); err != nil {
		t.Fatalf("the client in another PID namespace: %v\n%s", err, out)
	}
	direct := strings.TrimSpace(out)
	if !strings.HasPrefix(direct, fmt.Sprintf("/proc/%d/fd/", d.cmd.Process.Pid)) {
		t.Fatalf("batch 1's direct path %q is not the daemon's", direct)
	}
	if out, ok := asUser(t, 2000, base, "cat "+direct+" >/dev/null"); ok || !strings.Contains(out, "Permission denied") {
		t.Fatalf("uid 2000 read the daemon's file %s: %v %s", direct, ok, out)
	}
	status, _ := asUser(t, nobody, base, "cat mnt/status")
	if !strings.Contains(status, "data path: daemon reads from tmpfs huge=advise in a user namespace") {
		t.Fatalf("status as uid %d does not say where batches lie:\n%s", nobody, status)
	}
	// Nothing read ahead for a consumer that reads around FUSE; 13 opens
	// (4 by the script's own getxattr, 9 by the client) learned where.
	m := regexp.MustCompile(`the page cache its consumers share: (\d+) batches.*around FUSE: (\d+) opens learned`).FindStringSubmatch(status)
	if m == nil || m[1] != "0" || m[2] != "13" {
		t.Fatalf("status as uid %d: want 0 batches read ahead and 13 opens that learned where their batch lies:\n%s", nobody, status)
	}
}

// fallbackReader loads batch argv[4] of consumer argv[3] with the Python
// client and checks how it came: mapped from the daemon's own file
// (argv[5] "direct") or from the mount's file ("mount"), the mount's
// bytes either way.
const fallbackReader = `
import os, sys
sys.path.insert(0, sys.argv[1])
from tsock import batchfile
p = os.path.join(sys.argv[2], "consumers", sys.argv[3], "%06d.safetensors" % int(sys.argv[4]))
b = batchfile.load_batch(p)
with open(p, "rb") as f:
    plain = f.read()
assert b.direct == (sys.argv[5] == "direct"), "batch %s of %s: direct %s, want %s" % (sys.argv[4], sys.argv[3], b.direct, sys.argv[5])
assert bytes(b["indices"].tobytes()) in plain, "not the mount's bytes"
`

// Each fallback, on one mount of a daemon without root where no
// huge-page tmpfs can be had (user namespaces off, as some clusters set
// them; here, no directory for its mountpoint: TMPDIR names none): it
// keeps batches in memfds, as before, and says so. Its user's client
// still maps each batch from the daemon's file (a memfd's 4 KiB pages);
// the client reads the mount's file instead, the same bytes, as another
// user (--allow-other: /proc refuses it the daemon's files), in a PID
// namespace of its own (its /proc names no daemon) and without /proc.
func TestWithoutRootClientFallbacks(t *testing.T) {
	fusetest.NeedRoot(t, "root runs the daemon and its readers as users, and lets users allow others in")
	setDevFuse(t, 0o666)
	allowOthers(t)
	base := nobodysDirs(t, "mnt", "client")
	mnt, client := filepath.Join(base, "mnt"), filepath.Join(base, "client")
	bin := copyExecutable(t, tsockBinary(t), base)
	copyClient(t, client)
	if err := os.WriteFile(filepath.Join(base, "fallback.py"), []byte(fallbackReader), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "mount", mnt, "--source", "synthetic:24", "--batch-size", "8", "--image-size", "16", "--epochs", "1", "--allow-other")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base, "TMPDIR=" + filepath.Join(base, "none")}
	runDaemon(t, mnt, cmd)
	const other = 2000
	if out, ok := asUser(t, nobody, base, "mkdir mnt/consumers/c"); !ok {
		t.Fatalf("mkdir c: %s", out)
	}
	if out, ok := asUser(t, other, base, "mkdir mnt/consumers/o"); !ok {
		t.Fatalf("mkdir o as uid %d: %s", other, out)
	}
	read := func(how []string, consumer string, j int, want string) {
		t.Helper()
		args := append(how, "/usr/bin/python3", filepath.Join(base, "fallback.py"), client, mnt, consumer, fmt.Sprint(j), want)
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	as := func(uid int) []string {
		return []string{"setpriv", fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups"}
	}
	for j := range 3 { // another user: /proc refuses it the daemon's files
		read(as(other), "o", j, "mount")
	}
	read(append([]string{"unshare", "--pid", "--fork", "--mount-proc"}, as(nobody)...), "c", 0, "mount")
	read(append([]string{"unshare", "--mount", "sh", "-c", `umount -l /proc && exec "$@"`, "sh"}, as(nobody)...), "c", 1, "mount")
	read(as(nobody), "c", 2, "direct")
	status, _ := asUser(t, nobody, base, "cat mnt/status")
	if !strings.Contains(status, "data path: daemon reads from memfd (") {
		t.Fatalf("without a tmpfs: status as uid %d does not say memfd:\n%s", nobody, status)
	}
}

// copyClient copies the Python client into dir (dir/tsock), where every
// user may read it.
func copyClient(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("sh", "-c", `cp -r ../../scripts/python/tsock "$0" && chmod -R a+rX "$0"`, dir).CombinedOutput(); err != nil {
		t.Fatalf("copy the client into %s: %v %s", dir, err, out)
	}
}

// allowOthers lets users mount with allow_other (user_allow_other in
// /etc/fuse.conf, which fusermount3 reads) for the test, and restores
// the file at its end.
func allowOthers(t *testing.T) {
	t.Helper()
	const conf = "/etc/fuse.conf"
	was, err := os.ReadFile(conf)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, append(append([]byte{}, was...), []byte("\nuser_allow_other\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(conf, was, 0o644); err != nil {
			t.Errorf("restore %s: %v", conf, err)
		}
	})
}
