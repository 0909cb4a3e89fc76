package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tsock/tsock/batchstore/waittest"
)

// A child started by startDying outlives the thread that started it: the
// goroutine that starts it locks its thread and returns (Go then ends
// the thread), as the mount tests' readers do. The child blocks SIGTERM,
// so a death signal would stay pending where its status shows it: none
// may be. (Started there with a plain Start and Pdeathsig, the child got
// SIGTERM before it could block it: tried, it never said ready.)
func TestAChildOutlivesTheThreadThatStartedIt(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("python3", "-c", "import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])\nprint('ready', flush=True)\ntime.sleep(120)")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var err2 error
	tid := onAThreadThatEnds(t, func() { err2 = startDying(cmd, done) })
	if err2 != nil {
		t.Fatal(err2)
	}
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the child said %q (%v)", line, err)
	}
	task := fmt.Sprintf("/proc/self/task/%d", tid)
	waittest.Until(t, "the thread that started the child ended", func() bool {
		_, err := os.Stat(task)
		return os.IsNotExist(err)
	})
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		field, value, _ := strings.Cut(line, ":")
		if field != "SigPnd" && field != "ShdPnd" {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(value), 16, 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if mask&(1<<(syscall.SIGTERM-1)) != 0 {
			t.Fatalf("SIGTERM pending in the child (%s) once the thread that started it ended", line)
		}
	}
}

// onAThreadThatEnds runs fn on a goroutine that locks its thread and
// returns without unlocking it, so that Go ends the thread, and returns
// the thread's id. Not on the main thread, which Go never ends (it is
// wedged instead): a goroutine that lands there lets it go, and another
// is tried.
func onAThreadThatEnds(t *testing.T, fn func()) int {
	t.Helper()
	for range 1000 {
		tid := make(chan int)
		go func() {
			runtime.LockOSThread()
			if syscall.Gettid() == syscall.Getpid() {
				runtime.UnlockOSThread()
				tid <- 0
				return
			}
			fn()
			tid <- syscall.Gettid()
		}()
		if id := <-tid; id != 0 {
			return id
		}
	}
	t.Fatal("every goroutine ran on the main thread")
	return 0
}
