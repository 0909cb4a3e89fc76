package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsock/tsock/fs/fusetest"
)

// Debian's interpreter, with python3-numpy and python3-torch from
// scripts/setup.sh (the python3 first on PATH may lack them).
const python = "/usr/bin/python3"

// TestPythonClient runs the Python client's tests (scripts/python/
// test_tsock.py) against real mounts of the binary under test.
func TestPythonClient(t *testing.T) {
	fusetest.Need(t)
	if out, err := exec.Command(python, "-c", "import numpy, torch").CombinedOutput(); err != nil {
		t.Fatalf("%s lacks numpy or torch (scripts/setup.sh installs them: TSOCK_SETUP_TORCH=1): %v\n%s", python, err, out)
	}
	dir, err := filepath.Abs("../../scripts/python")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-m", "unittest", "-v", "test_tsock")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TSOCK_BIN="+tsockBinary(t), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python client tests: %v\n%s", err, out)
	}
	// The summary, so that the log shows what ran.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, l := range lines {
		switch {
		case strings.HasSuffix(l, "... ok"):
			t.Log(strings.Fields(l)[0])
		case strings.HasPrefix(l, "realphotos: ") || strings.HasPrefix(l, "eval vs torchvision: "):
			t.Log(l) // figures a test reports
		}
	}
	if !strings.HasSuffix(lines[len(lines)-1], "OK") {
		t.Fatalf("python client tests did not end OK:\n%s", out)
	}
}
