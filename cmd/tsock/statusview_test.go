package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dustin/go-humanize"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/producer/producertest"
)

// statusMount is a mount whose consumer trial-1 read both epochs and
// whose consumer idle-trial joined after and reads nothing, so that the
// producer waits for it.
func statusMount(t *testing.T) (d *mountProc, buffer int64) {
	t.Helper()
	src := producertest.Folder(t, 45, 4)
	buffer = 3 * (batchfile.DataStart + 8*(16+3*32*32))
	d = startDaemon(t, "--source", src, "--batch-size", "8", "--image-size", "32", "--epochs", "2",
		"--buffer", fmt.Sprint(buffer), "--workers", "2")
	cmd, _ := consume(t, d, "trial-1")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("consumer: %v", err)
	}
	if err := os.Mkdir(filepath.Join(d.dir, "consumers", "idle-trial"), 0o755); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, "the producer fills the buffer for idle-trial, then waits", func() bool {
		return readFile(t, filepath.Join(d.dir, "state")) == "full\n"
	})
	return d, buffer
}

func TestStatusShowsALiveMount(t *testing.T) {
	d, buffer := statusMount(t)
	out, errOut, code := tsockRun(context.Background(), "status", d.dir, "--json")
	if code != exitOK {
		t.Fatalf("status --json: exit %d: %s", code, errOut)
	}
	var doc statusDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status --json is not its document: %v\n%s", err, out)
	}
	if doc.Version != statusVersion || doc.Mode != "pipeline" || doc.Producer.Unit != "images" || doc.Producer.EpochLen != 45 ||
		doc.Buffer.Limit != buffer || doc.Producer.BatchSize != 8 || doc.Producer.Epochs != 2 {
		t.Errorf("status.json head: %+v", doc)
	}
	if len(doc.Producer.RateHistory) > rateHistory {
		t.Errorf("rate history of %d seconds, want at most %d", len(doc.Producer.RateHistory), rateHistory)
	}
	consumers := map[string]consumerDoc{}
	for _, c := range doc.Consumers {
		consumers[c.Name] = c
	}
	if c := consumers["trial-1"]; c.State != "done" || c.SamplesRead != 90 || c.EpochLen != 45 || c.Epoch != 1 || c.BatchesRead != 12 {
		t.Errorf("trial-1 read both epochs: %+v", c)
	}
	if c := consumers["idle-trial"]; c.State != "reading" || c.SamplesRead != 0 || c.Lag == 0 {
		t.Errorf("idle-trial joined and read nothing: %+v", c)
	}
	if doc.State != "full" {
		t.Errorf("state %q, want full: the producer waits for idle-trial", doc.State)
	}

	view, errOut, code := tsockRun(context.Background(), "status", d.dir)
	if code != exitOK {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSuffix(view, "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > viewWidth {
			t.Errorf("a line of %d columns: %q", n, line)
		}
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	if !strings.HasPrefix(view, "tsock "+d.dir+": full,") {
		t.Errorf("the view does not open with the mount and its state:\n%s", view)
	}
	if r := rows["trial-1"]; len(r) < 6 || r[1] != "done" || r[2] != "2/2" || r[4] != "100%" {
		t.Errorf("trial-1's row: %q\n%s", r, view)
	}
	if r := rows["idle-trial"]; len(r) < 6 || r[1] != "reading" || r[2] != "1/2" || r[4] != "0%" {
		t.Errorf("idle-trial's row: %q\n%s", r, view)
	}
	if r := rows["buffer"]; len(r) < 3 || !strings.Contains(strings.Join(r, " "), humanize.IBytes(uint64(buffer))+" of "+humanize.IBytes(uint64(buffer))) {
		t.Errorf("buffer row: %q\n%s", r, view)
	}
}

// drawCounter cancels a watch after its views'th view.
// (Only Write: io.WriteString must not go around it.)
type drawCounter struct {
	buf    bytes.Buffer
	views  int
	cancel context.CancelFunc
}

func (w *drawCounter) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	if strings.Count(w.buf.String(), "CONSUMER ") >= w.views {
		w.cancel()
	}
	return n, err
}

func (w *drawCounter) String() string { return w.buf.String() }

func TestStatusWatchRedraws(t *testing.T) {
	d, _ := statusMount(t)
	for _, terminal := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		out := &drawCounter{views: 3, cancel: cancel}
		c := &statusCommand{stdout: out}
		if err := c.Parse([]string{d.dir, "--watch", "--interval", "100ms"}); err != nil {
			t.Fatal(err)
		}
		c.terminal = terminal
		if err := c.Run(ctx); err != nil {
			t.Fatalf("watch (terminal %v): %v", terminal, err)
		}
		cancel()
		views := strings.Count(out.String(), "CONSUMER ")
		homes := strings.Count(out.String(), "\x1b[H")
		switch {
		case views != 3:
			t.Errorf("terminal %v: %d views, want 3 (then Ctrl-C):\n%s", terminal, views, out.String())
		case terminal && (homes != 3 || !strings.HasSuffix(out.String(), "\x1b[J\x1b[?25h\x1b[?1049l")):
			t.Errorf("on a terminal each view must draw over the last: %d homes in %q", homes, out.String())
		case !terminal && strings.Contains(out.String(), "\x1b"):
			t.Errorf("escape sequences written to a file: %q", out.String())
		}
	}
}

func TestStatusErrorsAreOneLine(t *testing.T) {
	check := func(what string, stderr string, code int, want string) {
		t.Helper()
		if code != exitError || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d, %q; want exit %d and one line with %q", what, code, stderr, exitError, want)
		}
	}
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "notes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := tsockRun(context.Background(), "status", full)
	check("a directory of files", stderr, code, "is not a tsock mount")
	// An empty one is no mount yet, never called "not a tsock mount":
	// `tsock mount … &` may be about to mount it.
	empty := t.TempDir()
	_, stderr, code = tsockRun(context.Background(), "status", empty)
	check("an empty directory", stderr, code, "nothing is mounted there yet (an empty directory): is `tsock mount` running?")
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	out, _, code := tsockRun(ctx, "status", "--watch", "--interval", "100ms", empty)
	if code != 0 || !strings.Contains(out, "waiting for it to start") {
		t.Errorf("--watch over an empty directory: exit %d, %q; want it drawn as waiting until Ctrl-C", code, out)
	}
	_, stderr, code = tsockRun(context.Background(), "status", "/no/such/dir")
	check("no directory", stderr, code, "no such file or directory")

	d := startDaemon(t, "--source", producertest.Folder(t, 8, 2), "--batch-size", "4", "--image-size", "32")
	bin := tsockBinary(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	reachable(t, d.dir)
	out, ok := asUser(t, nobody, "/", bin+" status "+d.dir)
	check("another user", out, map[bool]int{true: exitOK, false: exitError}[ok], "permission denied")

	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.done
	d.done <- nil // for Cleanup, which also unmounts what SIGKILL left
	_, stderr, code = tsockRun(context.Background(), "status", d.dir)
	check("a daemon killed", stderr, code, "the tsock daemon is gone")
}

// TestStatusWatchInATerminal draws the view in a real 80-column terminal
// (tmux) and reads the screen back: it must redraw in place, and no line
// may wrap.
func TestStatusWatchInATerminal(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("needs tmux (scripts/setup.sh installs it)")
	}
	d, _ := statusMount(t)
	server := fmt.Sprintf("tsock-test-%d", os.Getpid())
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", append([]string{"-L", server}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %q: %v: %s", args, err, out)
		}
		return string(out)
	}
	tmux("-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "30", tsockBinary(t)+" status --watch --interval 200ms "+d.dir)
	t.Cleanup(func() { exec.Command("tmux", "-L", server, "kill-server").Run() })
	var screens []string
	deadline := time.Now().Add(30 * time.Second)
	for len(screens) < 2 && time.Now().Before(deadline) {
		screen := tmux("capture-pane", "-p", "-t", "0")
		head, _, _ := strings.Cut(screen, "\n")
		// A new screen once the clock in its first line moves on.
		if strings.Contains(screen, "idle-trial") && (len(screens) == 0 || !strings.HasPrefix(screens[len(screens)-1], head)) {
			screens = append(screens, screen)
		}
		time.Sleep(50 * time.Millisecond) // polling the screen, not waiting out a race
	}
	if len(screens) < 2 {
		t.Fatalf("the watch did not redraw in 30s; screens: %q", screens)
	}
	last := screens[len(screens)-1]
	t.Logf("tmux, 80 columns:\n%s", last)
	if n := strings.Count(last, "CONSUMER "); n != 1 {
		t.Errorf("%d views on the screen, want 1 redrawn in place:\n%s", n, last)
	}
	lines := strings.Split(last, "\n")
	if !strings.HasPrefix(lines[0], "tsock "+d.dir) {
		t.Errorf("the screen does not start with the view's first line:\n%s", last)
	}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "trial-1" || f[0] == "idle-trial") && len(f) < 6 {
			t.Errorf("a consumer row is cut or wrapped: %q", l)
		}
	}
}

// TestPythonDrawsWhatGoDraws: python3 -m tsock status draws the very view
// tsock status draws, from the same status.json, branch for branch.
func TestPythonDrawsWhatGoDraws(t *testing.T) {
	mem, unknown := int64(3<<30), int64(-1)
	docs := map[string]statusDoc{
		"pipeline on a GPU": {
			Version: statusVersion, Mode: "pipeline", Source: "/data/\x1b[2Jimage\u0085net\ntrain/é", State: "full", StateText: "buffer full, waiting for consumers to read",
			Uptime: 3725.9, DataPath: "passthrough from tmpfs huge=advise (reads and mmaps never enter the daemon)", Skipped: 3,
			Producer: producerDoc{Unit: "images", BatchSize: 256, Epoch: 2, Epochs: 3, EpochDone: 652000, EpochLen: 1281167, Batches: 9000,
				Samples: 2304000, Rate: 1180.4, RateOverall: 1149.5, RateHistory: []float64{0, 500, 1180, 1250.5, 990, 1100}},
			Buffer: bufferDoc{Limit: 4 << 30, Used: 3<<30 + 123456789, Reserved: 40 << 20, Mapped: 9999, Batches: 14},
			GPU:    &gpuDoc{Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-1", Slabs: 8, SlabSize: 512 << 20, InUse: 3},
			Consumers: []consumerDoc{
				{Name: "trial-1", State: "reading", Epoch: 1, Epochs: 3, EpochDone: 640000, EpochLen: 1281167, Lag: 3, WaitShare: 0.123, GPUMemory: &mem},
				{Name: "a-consumer-with-a-very-long-name", State: "waiting", Epoch: -1, Epochs: 3, EpochLen: 1281167, Lag: 14, WaitShare: 1, GPUMemory: &unknown},
				{Name: "old\r\x7f", State: "evicted", Epoch: 0, Epochs: 3, EpochDone: 9, EpochLen: 1281167, Evicted: "stalled"},
			},
		},
		"ingest, unordered, no consumer": {
			Version: statusVersion, Mode: "ingest", Source: "ingest, unordered", State: "producing", StateText: "producing",
			Uptime: 12, DataPath: "daemon", Producer: producerDoc{Unit: "samples", Epoch: 0, EpochDone: 77},
			Buffer: bufferDoc{Limit: 1000, Used: 5, Mapped: -1}, Consumers: []consumerDoc{},
		},
		"folds": {
			Version: statusVersion, Mode: "pipeline", Source: "/data", State: "producing", StateText: "producing", Uptime: 9,
			Producer: producerDoc{Unit: "images", Epoch: 1, Epochs: 2, EpochLen: 100, EpochDone: 40},
			Buffer:   bufferDoc{Limit: 1 << 30, Mapped: -1},
			Consumers: []consumerDoc{
				{Name: "all", State: "reading", Subset: "all", Epoch: 0, Epochs: 2, EpochDone: 40, EpochLen: 100},
				{Name: "fold-2", State: "waiting", Subset: "fold 2/5", SubsetSize: 80, Epoch: 0, Epochs: 2, EpochDone: 30, EpochLen: 80},
				{Name: "mine", State: "reading", Subset: "list of 123456789", SubsetSize: 123456789, Epoch: 0, Epochs: 2, EpochLen: 123456789},
			},
		},
		"an eval mount that keeps part of its set": {
			Version: statusVersion, Mode: "pipeline", Source: "/data/val", State: "producing", StateText: "producing", Uptime: 30,
			Producer:  producerDoc{Unit: "images", Epoch: 2, EpochLen: 50000, EpochDone: 100},
			Buffer:    bufferDoc{Limit: 1 << 30, Used: 1 << 20, Mapped: -1, Batches: 1},
			Kept:      &keptDoc{Limit: 1 << 30, Used: 1<<30 - 4096, Samples: 7000, Served: 123456, Refused: 86000},
			Consumers: []consumerDoc{{Name: "val-3", State: "reading", Epoch: 1, Epochs: 3, EpochDone: 100, EpochLen: 50000}},
		},
		"a bucket whose keys go missing": {
			Version: statusVersion, Mode: "pipeline", Source: "s3://data/train", State: "producing", StateText: "producing", Uptime: 30,
			Skipped: 2, Missing: 17, Producer: producerDoc{Unit: "images", Epoch: 0, EpochLen: 400, EpochDone: 100},
			Buffer: bufferDoc{Limit: 1 << 30, Mapped: -1}, Consumers: []consumerDoc{},
		},
		"ingest, one consumer forever": {
			Version: statusVersion, Mode: "ingest", Source: "ingest", State: "idle", StateText: "idle", Uptime: 0.5,
			Producer:  producerDoc{Unit: "samples", Epoch: 7, EpochLen: 50, EpochDone: 50},
			Buffer:    bufferDoc{Limit: 1 << 20, Mapped: -1},
			Consumers: []consumerDoc{{Name: "c", State: "done", Epoch: 6, Epochs: 0, EpochDone: 50, EpochLen: 50, WaitShare: 0.5}},
		},
	}
	py := installedPython(t)
	now := time.Date(2026, 11, 23, 5, 19, 21, 0, time.Local)
	if view := renderStatus(docs["a bucket whose keys go missing"], "/mnt/x", now); !strings.Contains(view, "2 inputs; 17 keys missing, held until the epoch's end") {
		t.Errorf("the keys held missing are not said:\n%s", view)
	}
	for name, doc := range docs {
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "status.json")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(py, "-c", `import json, sys, tsock.status
sys.stdout.write(tsock.status.render(json.load(open(sys.argv[1])), sys.argv[2], float(sys.argv[3])))`,
			file, "/mnt/tsock", fmt.Sprint(now.Unix())).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: python: %v\n%s", name, err, out)
		}
		if want := renderStatus(doc, "/mnt/tsock", now); string(out) != want {
			t.Errorf("%s: python draws\n%s\ngo draws\n%s", name, out, want)
		}
		if want := renderStatus(doc, "/mnt/tsock", now); doc.Kept != nil && !strings.Contains(want, "\nkept      ████████████████████ 1024 MiB of 1.0 GiB, 7000 samples, 86000 not kept\n") {
			t.Errorf("the kept line is missing or wrong:\n%s", want)
		}
		if want := renderStatus(doc, "/mnt/tsock", now); name == "folds" && (!strings.Contains(want, " SUBSET") || !strings.Contains(want, "fold 2/5") || !strings.Contains(want, "list of 12…")) {
			t.Errorf("the subsets' view lacks their column:\n%s", want)
		}
	}
}

// statusFixtures are the documents every reader of a mount's status reads
// (scripts/python/tests/fixtures/status: its README).
const statusFixtures = "../../scripts/python/tests/fixtures/status"

// TestStatusFixtures: the view of each status.json fixture is its .view
// (the Python client draws the same, test_status_view), its text
// (MOUNTPOINT/status, rendered from the document alone) its .status, and each
// mountpoint that serves no status gives the error reads.json says, the
// one the Python client gives: a starting mount is starting, never "not
// a tsock mount".
func TestStatusFixtures(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(statusFixtures, "*.json"))
	if err != nil || len(docs) < 3 {
		t.Fatalf("fixtures: %v %v", docs, err)
	}
	for _, path := range docs {
		if filepath.Base(path) == "reads.json" {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc statusDoc
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// The view (tsock status, the Python client's) and the text
		// (MOUNTPOINT/status), each of the document alone.
		for ext, got := range map[string]string{
			".view":   renderStatus(doc, "/mnt/tsock", time.Unix(0, 0).UTC()),
			".status": statusText(doc),
		} {
			golden := strings.TrimSuffix(path, ".json") + ext
			if os.Getenv("TSOCK_UPDATE_FIXTURES") != "" {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("%s rendered:\n%s\nwant (%s):\n%s", path, got, golden, want)
			}
		}
	}
	var reads []struct {
		Name    string
		Files   map[string]string
		Missing bool
		Error   string
	}
	data, err := os.ReadFile(filepath.Join(statusFixtures, "reads.json"))
	if err != nil || json.Unmarshal(data, &reads) != nil || len(reads) == 0 {
		t.Fatalf("reads.json: %v", err)
	}
	for _, r := range reads {
		mount := filepath.Join(t.TempDir(), "mnt")
		if !r.Missing {
			if err := os.Mkdir(mount, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, text := range r.Files {
				if err := os.WriteFile(filepath.Join(mount, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		_, _, err := readStatus(mount)
		if want := strings.ReplaceAll(r.Error, "{mount}", mount); err == nil || err.Error() != want {
			t.Errorf("%s: %v; want %q", r.Name, err, want)
		}
	}
}
