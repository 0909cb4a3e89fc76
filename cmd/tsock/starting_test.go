package main

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs/fusetest"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// TestAConsumerStartedWithTheMountWaitsForIt: the README's own lines, a
// consumer started right after `tsock mount … &`, over a bucket whose
// first index is held until the consumer has said it waits: the client
// waits through the empty mountpoint and the starting mount, says on
// stderr what it waits for, then reads the epoch whole. (Before: "not a
// tsock mount … is `tsock mount` running?" while the mount was starting.)
func TestAConsumerStartedWithTheMountWaitsForIt(t *testing.T) {
	fusetest.Need(t)
	py, bin := installedPython(t), tsockBinary(t)
	server, _ := shardsInS3(t)
	gate := make(chan struct{}) // the store answers nothing until the consumer waits
	proxy := s3test.StartProxy(t, server, func(int) s3test.Fault { <-gate; return s3test.Pass })
	opened := false
	defer func() {
		if !opened {
			close(gate)
		}
	}()
	dir := t.TempDir()
	mount := exec.Command(bin, "mount", dir, "--source", "s3://data/train/shard-{000..002}.tar", "--s3-endpoint", proxy.Endpoint,
		"--shard-index", t.TempDir()+"/train.idx", "--epochs", "1", "--batch-size", "4")
	var mountErr bytes.Buffer
	mount.Stderr = &mountErr
	done := make(chan error, 1)
	if err := startDying(mount, done); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mount.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			mount.Process.Kill()
			<-done
		}
		syscall.Unmount(dir, syscall.MNT_DETACH)
	})
	consumer := exec.Command(py, "-c", `import sys, tsock
c = tsock.Consumer(sys.argv[1], start_timeout=120)
print(sum(len(b["labels"]) for b in next(c.epochs())))
c.close()`, dir)
	var out bytes.Buffer
	consumer.Stdout = &out
	pipe, err := consumer.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := consumer.Start(); err != nil {
		t.Fatal(err)
	}
	// The consumer's stderr, line by line: the gate opens once it says
	// it waits for the starting mount.
	var said strings.Builder
	waiting, read := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(read)
		lines := bufio.NewScanner(pipe)
		for seen := false; lines.Scan(); {
			said.WriteString(lines.Text() + "\n")
			if !seen && strings.HasPrefix(lines.Text(), "tsock: waiting for "+dir+" is starting: ") {
				seen = true
				close(waiting)
			}
		}
	}()
	select {
	case <-waiting:
	case <-read:
	case <-time.After(waittest.Limit):
	}
	opened = true
	close(gate)
	<-read
	if err := consumer.Wait(); err != nil {
		t.Fatalf("the consumer: %v\n%s\nthe mount:\n%s", err, said.String(), mountErr.String())
	}
	select {
	case <-waiting:
	default:
		t.Fatalf("the consumer did not say it waited for the starting mount:\n%s", said.String())
	}
	if got := strings.TrimSpace(out.String()); got != "20" {
		t.Fatalf("the consumer read %q samples, want the epoch's 20\n%s", got, said.String())
	}
	t.Logf("the consumer said:\n%s", said.String())
}
