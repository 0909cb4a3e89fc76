package main

import (
	"bytes"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tsock/tsock/fs/fusetest"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// TestAConsumerStartedWithTheMountWaitsForIt: the README's own lines, a
// consumer started right after `tsock mount … &`, over a bucket whose
// first index takes seconds (every answer 700 ms away): the client waits
// through the empty mountpoint and the starting mount, says on stderr
// what it waits for, then reads the epoch whole. (Before: "not a tsock
// mount … is `tsock mount` running?" while the mount was starting.)
func TestAConsumerStartedWithTheMountWaitsForIt(t *testing.T) {
	fusetest.Need(t)
	began := time.Now()
	py := installedPython(t)
	bin := tsockBinary(t)
	t.Logf("client and binary ready in %s", time.Since(began))
	began = time.Now()
	server, _ := shardsInS3(t)
	proxy := s3test.StartProxy(t, server, func(int) s3test.Fault { return s3test.Pass })
	proxy.Delay.Store(int64(700 * time.Millisecond))
	dir := t.TempDir()
	mount := exec.Command(bin, "mount", dir, "--source", "s3://data/train/shard-{000..002}.tar", "--s3-endpoint", proxy.Endpoint,
		"--shard-index", t.TempDir()+"/train.idx", "--epochs", "1", "--batch-size", "4")
	var mountErr bytes.Buffer
	mount.Stderr = &mountErr
	mount.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := mount.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mount.Wait() }()
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
	var out, stderr bytes.Buffer
	consumer.Stdout, consumer.Stderr = &out, &stderr
	if err := consumer.Run(); err != nil {
		t.Fatalf("the consumer: %v\n%s\nthe mount:\n%s", err, stderr.String(), mountErr.String())
	}
	t.Logf("mounted and read in %s", time.Since(began))
	if got := strings.TrimSpace(out.String()); got != "20" {
		t.Fatalf("the consumer read %q samples, want the epoch's 20\n%s", got, stderr.String())
	}
	if !strings.Contains(stderr.String(), "tsock: waiting for "+dir+" is starting: ") {
		t.Fatalf("the consumer did not say what it waited for:\n%s", stderr.String())
	}
	t.Logf("the consumer said:\n%s", stderr.String())
}
