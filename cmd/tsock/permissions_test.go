package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody is the second user of these tests: any uid that is not root.
const nobody = 65534

// asUser runs a shell script as uid, in dir; it returns the script's
// output and whether it succeeded.
func asUser(t *testing.T, uid uint32, dir, script string) (string, bool) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("run as uid %d: %v", uid, err)
	}
	return string(out), err == nil
}

// reachable lets every user walk down to dir (t.TempDir's are root's, 0700).
func reachable(t *testing.T, dir string) {
	t.Helper()
	for d := filepath.Dir(dir); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// Another user can neither read a consumer's batches (consuming them for
// it), nor remove them, nor set its batch size, nor remove the consumer;
// it can join and read as itself. Without --allow-other it cannot enter.
func TestOtherUsersCannotTouchAConsumer(t *testing.T) {
	t.Parallel() // see parallelTests
	d := startDaemon(t, "--source", "synthetic:40", "--batch-size", "8", "--image-size", "16", "--allow-other")
	reachable(t, d.dir)
	trial := filepath.Join(d.dir, "consumers", "trial")
	if err := os.Mkdir(trial, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, attack := range []string{
		"ls consumers/trial",
		"cat consumers/trial/000000.safetensors >/dev/null",
		"cat consumers/trial/status",
		"echo 4 > consumers/trial/batch_size",
		"rm consumers/trial/000000.safetensors",
		"rmdir consumers/trial",
		"mv consumers/trial consumers/mine",
		"echo x > status",
	} {
		out, ok := asUser(t, nobody, d.dir, attack)
		if ok || !(strings.Contains(out, "Permission denied") || strings.Contains(out, "Operation not permitted") ||
			strings.Contains(out, "Read-only file system")) {
			t.Errorf("as uid %d, %q: succeeded=%v, %q: want refused", nobody, attack, ok, out)
		}
	}
	after, err := os.ReadFile(filepath.Join(trial, "status"))
	if err != nil {
		t.Fatalf("the trial is gone: %v", err)
	}
	for _, line := range []string{"batch size: 8\n", "position: 0\n", "batches read: 0\n", "open batches: 0\n"} {
		if !strings.Contains(string(after), line) {
			t.Errorf("the trial changed under another user: no %q in\n%s", line, after)
		}
	}
	// The other user's own consumer is its own, and root may still act on it.
	out, ok := asUser(t, nobody, d.dir, `mkdir consumers/mine && echo 4 > consumers/mine/batch_size &&
		cat consumers/mine/000000.safetensors >/dev/null && cat consumers/mine/batch_size && stat -c '%u %a' consumers/mine`)
	if !ok || out != "4\n65534 700\n" {
		t.Fatalf("uid %d with its own consumer: %q (succeeded %v)", nobody, out, ok)
	}
	if err := os.Remove(filepath.Join(d.dir, "consumers", "mine")); err != nil {
		t.Fatalf("root removing another user's consumer: %v", err)
	}

	closed := startDaemon(t, "--source", "synthetic:40", "--batch-size", "8", "--image-size", "16")
	reachable(t, closed.dir)
	if out, ok := asUser(t, nobody, "/", "ls "+closed.dir); ok || !strings.Contains(out, "Permission denied") {
		t.Fatalf("without --allow-other, uid %d listed the mount: %q", nobody, out)
	}
}
