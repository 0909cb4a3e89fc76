package main

import (
	"fmt"
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

var (
	venv    builtOnce
	venvDir string // for TestMain to remove
)

// installedPython is the interpreter of a venv that sees Debian's numpy
// and torch and has the client installed as the README says (pip install
// scripts/python), built once per test run; TestMain removes it.
func installedPython(t *testing.T) string {
	t.Helper()
	return venv.get(t, func() (string, error) {
		if out, err := exec.Command(python, "-c", "import numpy, torch").CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s lacks numpy or torch (scripts/setup.sh installs them: TSOCK_SETUP_TORCH=1): %v\n%s", python, err, out)
		}
		var err error
		if venvDir, err = os.MkdirTemp("", "tsock-venv-"); err != nil {
			return "", err
		}
		// From a copy: a build in place leaves build/ and *.egg-info in the
		// checkout.
		src := filepath.Join(venvDir, "src")
		if err := copyPackage(src); err != nil {
			return "", err
		}
		for _, args := range [][]string{
			{python, "-m", "venv", "--system-site-packages", venvDir},
			// Offline: numpy comes from the system, setuptools too.
			{filepath.Join(venvDir, "bin", "pip"), "install", "--quiet", "--no-index", "--no-build-isolation", src},
		} {
			if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				return "", fmt.Errorf("%q: %v\n%s", args, err, out)
			}
		}
		return filepath.Join(venvDir, "bin", "python"), nil
	})
}

// copyPackage copies the Python package's files (scripts/python's
// pyproject.toml and tsock/) to dir.
func copyPackage(dir string) error {
	if err := os.CopyFS(filepath.Join(dir, "tsock"), os.DirFS("../../scripts/python/tsock")); err != nil {
		return fmt.Errorf("copy the Python package: %w", err)
	}
	project, err := os.ReadFile("../../scripts/python/pyproject.toml")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "pyproject.toml"), project, 0o644)
	}
	return err
}

// TestPythonClient runs the Python client's tests (scripts/python/tests)
// with the installed package, against real mounts of the binary under
// test.
func TestPythonClient(t *testing.T) {
	fusetest.Need(t)
	py := installedPython(t)
	dir, err := filepath.Abs("../../scripts/python/tests")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-m", "unittest", "-v", "test_tsock")
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
