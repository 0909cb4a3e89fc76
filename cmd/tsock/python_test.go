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
// pyproject.toml, README.md and tsock/) to dir, with tsock/VERSION, a
// link to cmd/tsock/VERSION, as the file it links to.
func copyPackage(dir string) error {
	pkg := filepath.Join(dir, "tsock")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"../../scripts/python/pyproject.toml": filepath.Join(dir, "pyproject.toml"),
		"../../scripts/python/README.md":      filepath.Join(dir, "README.md"),
		"VERSION":                             filepath.Join(pkg, "VERSION"),
	}
	entries, err := os.ReadDir("../../scripts/python/tsock")
	if err != nil {
		return fmt.Errorf("copy the Python package: %w", err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			files[filepath.Join("../../scripts/python/tsock", e.Name())] = filepath.Join(pkg, e.Name())
		}
	}
	for from, to := range files {
		data, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(to, data, 0o644)
		}
		if err != nil {
			return fmt.Errorf("copy the Python package: %w", err)
		}
	}
	return nil
}

// parallelTests: the package's longest tests (the Python client's suite,
// 220 s of the package's 500; the sparse fleets; the bounded subset
// files; …) call t.Parallel, so that they run beside one another once
// the others are done (go test -parallel: GOMAXPROCS at a time): they
// wait on daemons and Python far more than they compute, and the package
// is scripts/test.sh's long pole. None of them changes what is the
// machine's (the /dev/fuse mode, pipe-max-size, the environment): the
// tests that do stay sequential, and every sequential test ends before
// a parallel one starts.

// TestPythonClient runs the Python client's tests (scripts/python/tests)
// with the installed package: the format and the status view alone, then
// against real mounts of the binary under test.
func TestPythonClient(t *testing.T) {
	fusetest.Need(t)
	t.Parallel() // see parallelTests
	py := installedPython(t)
	dir, err := filepath.Abs("../../scripts/python/tests")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-m", "unittest", "-v", "test_format", "test_status_view", "test_tsock")
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
