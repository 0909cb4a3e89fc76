package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
// a parallel one starts. So do the tests whose verdict runs on a short
// clock of the daemon's (--consumer-timeout 1s): beside three others on
// two cores (-parallel 4), a reader's next step came after its clock ran
// out; and those whose verdict is a close's error (a subset list refused
// at the writer's last close): a process another test forks holds a copy
// of the descriptor until its exec, and the writer's close is then not
// the last (the list is applied at the release, its refusal in status).

// pythonParts are the Python suite's longest classes (a training each
// for accuracy, two ranks of a DDP training, the examples' sweeps): each
// runs in a process of its own beside the others and beside the rest of
// the suite, as parallel subtests. They wait on mounts, torch and their
// own trainings more than they compute; run as one process the suite
// was the package's long pole (259 s of the package's 450).
var pythonParts = []string{"test_tsock.AccuracyTest", "test_tsock.DDPTest", "test_tsock.ExamplesTest"}

// TestPythonClient runs the Python client's tests (scripts/python/tests)
// with the installed package: the format and the status view alone, and
// the client against real mounts of the binary under test. Python's own
// loader lists the tests, so that a class added later runs in the part
// "rest" and none is lost: each part must run every test it was given.
func TestPythonClient(t *testing.T) {
	fusetest.Need(t)
	t.Parallel() // see parallelTests
	py := installedPython(t)
	dir, err := filepath.Abs("../../scripts/python/tests")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TSOCK_BIN="+plainTsockBinary(t), "PYTHONDONTWRITEBYTECODE=1")
	parts := map[string][]string{}
	for _, id := range listPythonTests(t, py, dir, env, "test_format", "test_status_view", "test_tsock") {
		part := "rest"
		if class := id[:strings.LastIndex(id, ".")]; slices.Contains(pythonParts, class) {
			part = class
		}
		parts[part] = append(parts[part], id)
	}
	for _, class := range pythonParts {
		if len(parts[class]) == 0 {
			t.Fatalf("the Python suite has no tests in %s (renamed? update pythonParts)", class)
		}
	}
	for part, ids := range parts {
		t.Run(part, func(t *testing.T) {
			t.Parallel()
			runPythonTests(t, py, dir, env, ids)
		})
	}
}

// listPythonTests is every test id in the modules, as Python's unittest
// loader finds them.
func listPythonTests(t *testing.T, py, dir string, env []string, modules ...string) []string {
	t.Helper()
	const list = `import sys, unittest
def ids(s):
    for x in s:
        yield from (ids(x) if isinstance(x, unittest.TestSuite) else [x.id()])
for i in ids(unittest.defaultTestLoader.loadTestsFromNames(sys.argv[1:])):
    print(i)`
	cmd := exec.Command(py, append([]string{"-c", list}, modules...)...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("listing the Python tests: %v\n%s", err, out)
	}
	ids := strings.Fields(string(out))
	for _, id := range ids {
		if strings.HasPrefix(id, "unittest.loader._FailedTest.") { // a module that failed to import
			runPythonTests(t, py, dir, env, []string{strings.TrimPrefix(id, "unittest.loader._FailedTest.")})
			t.Fatalf("the Python test module %s does not load", id)
		}
	}
	if len(ids) == 0 {
		t.Fatal("no Python tests listed")
	}
	return ids
}

// runPythonTests runs the tests ids in one process and fails unless every
// one of them ran and passed (a skip is no pass).
func runPythonTests(t *testing.T, py, dir string, env []string, ids []string) {
	t.Helper()
	cmd := exec.Command(py, append([]string{"-m", "unittest", "-v"}, ids...)...)
	cmd.Dir, cmd.Env = dir, env
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
	ran := -1
	for _, l := range lines {
		if strings.HasPrefix(l, "Ran ") {
			fmt.Sscanf(l, "Ran %d test", &ran)
		}
	}
	if !strings.HasSuffix(lines[len(lines)-1], "OK") || ran != len(ids) {
		t.Fatalf("python client tests did not end OK having run all %d:\n%s", len(ids), out)
	}
}
