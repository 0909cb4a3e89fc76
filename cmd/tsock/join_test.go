package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// TestLateJoinersOwnSizesAndACrash: consumers in separate processes join at
// random moments with their own batch sizes while one is killed with
// SIGKILL mid-epoch; every survivor reads exact epochs of its own, and
// all of them read the same samples, byte for byte, where they overlap.
func TestLateJoinersOwnSizesAndACrash(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TSOCK_TEST_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("TSOCK_TEST_SEED=%q: %v", s, err)
		}
	}
	t.Logf("TSOCK_TEST_SEED=%d replays this schedule", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	src := producertest.Folder(t, 37, 3)
	folder, err := source.Open(context.Background(), src, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const batch, epochs, buffered = 8, 2, 6
	buffer := fmt.Sprint(buffered * (batchfile.DataStart + batch*(16+3*32*32)))
	d := startDaemon(t, "--source", src, "--batch-size", fmt.Sprint(batch), "--image-size", "32",
		"--epochs", fmt.Sprint(epochs), "--buffer", buffer, "--consumer-timeout", "1s", "--workers", "2")

	type run struct {
		name string
		size int
		cmd  *exec.Cmd
		out  string
	}
	runs := []*run{{name: "first", size: batch}}
	runs[0].cmd, runs[0].out = consumeSized(t, d, "first", 0)
	// The victim maps a batch and is killed while the others go on.
	// startVictim returns once it has mapped its batch; it then waits on
	// its stdin, so that only the kill ends it.
	victimDir := filepath.Join(d.dir, "consumers", "victim")
	if err := os.Mkdir(victimDir, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := startVictim(t, filepath.Join(victimDir, "000000.safetensors"))
	for i, size := range []int{batch, 4, 16, 5} {
		// While the victim lives it holds batch 0, and with it a place in
		// the buffer: first can read no further than the buffer's batches.
		reach := 2 * 37 / batch
		if i <= 1 {
			reach = buffered
		}
		waitPosition(t, d, "first", rng.IntN(reach))
		r := &run{name: fmt.Sprintf("late%d", i), size: size}
		r.cmd, r.out = consumeSized(t, d, r.name, size)
		runs = append(runs, r)
		if i == 1 {
			if err := victim.Process.Kill(); err != nil {
				t.Fatalf("the victim was gone before its kill: %v", err)
			}
			if err := victim.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Fatalf("the victim ended by itself (%v), not by the kill", err)
			}
		}
	}
	var streams [][][]byte // per consumer: every sample's index and image
	for _, r := range runs {
		if err := r.cmd.Wait(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		batches, _ := readCopies(t, r.out)
		want := producertest.Stream{Good: producertest.All(folder.Len()), Label: folder.Label, BatchSize: r.size, Epochs: epochs}
		if err := want.Check(batches); err != nil {
			status, _ := os.ReadFile(filepath.Join(d.dir, "consumers", r.name, "status"))
			t.Fatalf("%s: %v\n%s", r.name, err, status)
		}
		streams = append(streams, samples(batches))
	}
	// All consumers read one stream of samples, each skipping stretches
	// of it as its epochs say, in one order.
	overlaps := 0
	for i := range streams {
		for j := i + 1; j < len(streams); j++ {
			shared, err := sameOrder(streams[i], streams[j])
			if err != nil {
				t.Fatalf("%s against %s: %v", runs[j].name, runs[i].name, err)
			}
			if shared > 0 {
				overlaps++
			}
		}
	}
	if overlaps < len(streams)-1 {
		t.Fatalf("only %d pairs of consumers read common samples", overlaps)
	}
	d.stop(t)
}

// waitPosition returns once consumer name has consumed n batches.
func waitPosition(t *testing.T, d *mountProc, name string, n int) {
	t.Helper()
	var status []byte
	var pos int
	// Polling a status file: there is no event to wait on.
	waittest.Report(t, func() bool {
		var err error
		if status, err = os.ReadFile(filepath.Join(d.dir, "consumers", name, "status")); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			fmt.Sscanf(line, "position: %d", &pos)
		}
		return pos >= n || strings.Contains(string(status), "state: done")
	}, func() string { return fmt.Sprintf("%s stuck at position %d:\n%s", name, pos, status) })
}

// samples flattens batches to one record per sample: index and image bytes.
func samples(batches []*batchfile.Batch) [][]byte {
	var out [][]byte
	for _, b := range batches {
		per := len(b.Images) / b.Samples()
		for i := 0; i < b.Samples(); i++ {
			rec := append([]byte(fmt.Sprintf("%d:", b.Indices[i])), b.Images[i*per:(i+1)*per]...)
			out = append(out, rec)
		}
	}
	return out
}

// sameOrder: the samples two consumers both read (the same index and
// image bytes: made once, in one producer epoch) come in the same order
// in both. Each consumer reads the producer's one stream of samples,
// skipping stretches of it but never reordering it: a late joiner's
// first epoch is the rest of one producer epoch and the samples it
// missed, first in the next, and its later epochs are whole producer
// epochs from the one after; what it skips between is made for others.
// It returns how many samples they share (a joiner that came after
// another finished need share none).
func sameOrder(a, b [][]byte) (int, error) {
	at := make(map[string][]int, len(a)) // a record's positions in a, ascending
	for i, r := range a {
		at[string(r)] = append(at[string(r)], i)
	}
	shared, last := 0, -1
	for j, r := range b {
		positions, ok := at[string(r)]
		if !ok {
			continue
		}
		k := sort.SearchInts(positions, last+1)
		if k == len(positions) {
			return shared, fmt.Errorf("the streams disagree on order: sample %d of one is sample %d of the other, not after %d, where a shared sample before it was", j, positions[len(positions)-1], last)
		}
		last = positions[k]
		shared++
	}
	return shared, nil
}
