package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/fs"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// epochsOf groups a consumer's copied batches by its own epoch, as the
// dataset indices of each.
func epochsOf(batches []*batchfile.Batch) map[int][]int {
	out := map[int][]int{}
	for _, b := range batches {
		for _, i := range b.Indices {
			out[b.Epoch] = append(out[b.Epoch], int(i))
		}
	}
	return out
}

// TestSubsetsThroughTheMount: consumers in their own processes train on
// a fold, its holdout, two classes and an explicit binary list written in
// pieces, each exactly once per epoch in its own batch size; the fold and
// its holdout split the dataset; bad writes fail with EINVAL and change
// nothing; status and status.json say each consumer's subset.
func TestSubsetsThroughTheMount(t *testing.T) {
	const n, epochs = 40, 2
	dir := producertest.Folder(t, n, 4)
	d := startDaemon(t, "--source", dir, "--image-size", "8", "--batch-size", "4", "--epochs", fmt.Sprint(epochs))
	list := make([]byte, 0, 8*7)
	var listed []int
	for _, i := range []int{39, 0, 17, 5, 23, 8, 31} {
		list = binary.LittleEndian.AppendUint64(list, uint64(i))
		listed = append(listed, i)
	}
	// The list goes in by several writes, applied at the close.
	if err := os.Mkdir(filepath.Join(d.dir, "consumers", "list"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(d.dir, "consumers", "list", "subset"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < len(list); k += 24 {
		if _, err := f.Write(list[k:min(k+24, len(list))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close of a good list: %v", err)
	}
	if got := readFile(t, filepath.Join(d.dir, "consumers", "list", "subset")); got != "list of 7\n" {
		t.Fatalf("subset of list reads %q", got)
	}
	// Bad writes: EINVAL, and the subset stays.
	for _, bad := range []string{"fold 6/5\n", "classes nosuch\n", "holdout 0/0\n", "3\n3\n", "41\n", "junk\x00"} {
		err := os.WriteFile(filepath.Join(d.dir, "consumers", "list", "subset"), []byte(bad), 0o644)
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("write %q: %v, want EINVAL", bad, err)
		}
	}
	if got := readFile(t, filepath.Join(d.dir, "consumers", "list", "subset")); got != "list of 7\n" {
		t.Fatalf("subset of list after bad writes reads %q", got)
	}
	if st := readFile(t, filepath.Join(d.dir, "consumers", "list", "status")); !strings.Contains(st, `last subset refused: "binary list of 5 bytes`) {
		t.Fatalf("status does not say why the last write was refused:\n%s", st)
	}
	outs := map[string]string{}
	procs := map[string]*exec.Cmd{}
	for name, knobs := range map[string]map[string]string{
		"train": {"subset": "fold 2/4\n", "batch_size": "3\n"},
		"val":   {"subset": "holdout 2/4\n"},
		"cls":   {"subset": "classes class001 3\n"},
	} {
		procs[name], outs[name] = consumeWith(t, d, name, knobs)
	}
	procs["list"], outs["list"] = startReader(t, d, "list")
	st := readFile(t, filepath.Join(d.dir, "status"))
	for _, want := range []string{"subset fold 2/4 (30 samples)", "subset holdout 2/4 (10 samples)", "subset classes class001 3 (20 samples)", "subset list of 7 (7 samples)"} {
		if !strings.Contains(st, want) {
			t.Errorf("status lacks %q:\n%s", want, st)
		}
	}
	got := map[string]map[int][]int{}
	for name, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		batches, _ := readCopies(t, outs[name])
		got[name] = epochsOf(batches)

	}
	src, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var classes []int
	for i := range n {
		if l := src.Label(i); l == 1 || l == 3 {
			classes = append(classes, i)
		}
	}
	slices.Sort(listed)
	for name, want := range map[string][]int{"cls": classes, "list": listed} {
		for e := range epochs {
			if ep := slices.Sorted(slices.Values(got[name][e])); !slices.Equal(ep, want) {
				t.Errorf("%s: epoch %d holds %v, want %v", name, e, ep, want)
			}
		}
	}
	for e := range epochs {
		train, val := slices.Sorted(slices.Values(got["train"][e])), slices.Sorted(slices.Values(got["val"][e]))
		both := slices.Sorted(slices.Values(append(slices.Clone(train), val...)))
		if len(train) != 30 || len(val) != 10 || !slices.Equal(both, producertestAll(n)) {
			t.Errorf("epoch %d: fold 2/4 holds %v, holdout 2/4 %v: want a split of the %d samples", e, train, val, n)
		}
	}
	d.stop(t)
}

func producertestAll(n int) []int { return producertest.All(n) }

// TestSubsetsSurviveAKillAndChangeMidRun: through the mount, a consumer
// on a subset killed with SIGKILL while it maps a batch is evicted and
// holds nobody up; another, read by this process, changes its subset
// after its first batch: the change shows in status at once and applies
// from a later epoch of its, each epoch exactly one subset; a third gets
// exact epochs of its own throughout.
func TestSubsetsSurviveAKillAndChangeMidRun(t *testing.T) {
	const n, epochs = 40, 3
	dir := producertest.Folder(t, n, 4)
	buffer := fmt.Sprint(4 * (batchfile.DataStart + 8*(16+3*16*16)))
	d := startDaemon(t, "--source", dir, "--image-size", "16", "--batch-size", "8", "--epochs", fmt.Sprint(epochs),
		"--buffer", buffer, "--consumer-timeout", "1s")
	join := func(name, subset string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(d.dir, "consumers", name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.dir, "consumers", name, "subset"), []byte(subset), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	join("victim", "holdout 1/2\n")
	victim := startVictim(t, filepath.Join(d.dir, "consumers", "victim", fs.BatchName(0)))
	survivor, out := consumeWith(t, d, "survivor", map[string]string{"subset": "holdout 1/2\n", "batch_size": "5\n"})
	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	victim.Wait()
	// Joined only now, and read at once: a consumer that neither reads nor
	// holds a file for --consumer-timeout (1 s) while the buffer is full is
	// evicted, and starting the two processes above may take that long.
	join("switch", "fold 1/2\n")
	switched := readInProcess(t, d, "switch", func(j uint64) {
		if j == 0 {
			if err := os.WriteFile(filepath.Join(d.dir, "consumers", "switch", "subset"), []byte("holdout 1/2\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if st := readFile(t, filepath.Join(d.dir, "consumers", "switch", "status")); !strings.Contains(st, "next subset: holdout 1/2, from its epoch ") {
				t.Fatalf("status after the change:\n%s", st)
			}
		}
	})
	if err := survivor.Wait(); err != nil {
		t.Fatalf("survivor: %v", err)
	}
	batches, _ := readCopies(t, out)
	src, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d2 := batchstore.Dataset{Len: n, Label: src.Label, Classes: src.Classes(), Seed: 0}
	fold, _ := batchstore.ParseSubset([]byte("fold 1/2"), d2)
	hold, _ := batchstore.ParseSubset([]byte("holdout 1/2"), d2)
	var foldSet, holdSet []int
	for i := range n {
		if fold.Has(i) {
			foldSet = append(foldSet, i)
		} else if hold.Has(i) {
			holdSet = append(holdSet, i)
		}
	}
	got := epochsOf(batches)
	for e := range epochs {
		if ep := slices.Sorted(slices.Values(got[e])); !slices.Equal(ep, holdSet) {
			t.Errorf("survivor: epoch %d holds %v, want %v", e, ep, holdSet)
		}
	}
	byEpoch, sw := epochsOf(switched), make([][]int, epochs)
	for e := range sw {
		sw[e] = byEpoch[e]
	}
	changed, err := producertest.Switched(sw, foldSet, holdSet)
	if err != nil {
		t.Errorf("switch: %v", err)
	}
	if changed < 1 {
		t.Errorf("switch: the change applied from epoch %d, want a later one than its first", changed)
	}
	if st := readFile(t, filepath.Join(d.dir, "consumers", "victim", "state")); st != "evicted\n" {
		t.Errorf("victim: %q", st)
	}
	d.stop(t)
}

// readInProcess reads consumer name's batches from this process, in
// order, to the end, calling after with each batch number read.
func readInProcess(t *testing.T, d *mountProc, name string, after func(j uint64)) []*batchfile.Batch {
	t.Helper()
	var got []*batchfile.Batch
	for j := uint64(0); ; j++ {
		data, err := os.ReadFile(filepath.Join(d.dir, "consumers", name, fs.BatchName(j)))
		if errors.Is(err, os.ErrNotExist) {
			return got
		}
		if err != nil {
			t.Fatalf("%s: batch %d: %v", name, j, err)
		}
		b, err := batchfile.ParseBatch(data)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b)
		after(j)
	}
}

// Subset files cannot exhaust the daemon's memory nor apply the wrong
// thing: a binary list whose first index reads as a letter is a list, not
// a one-line form; a list longer than any subset of the dataset is refused
// at the write that passes it (EFBIG); all lists being written share a
// bound (ENOSPC past it), given back at their close.
func TestSubsetFilesAreBounded(t *testing.T) {
	t.Parallel() // see parallelTests
	// Plain-built: the race detector made the big lists' parsing most
	// of this test's time (plainTsockBinary).
	small := startPlainDaemon(t, "--source", "synthetic:200", "--image-size", "8", "--batch-size", "4", "--epochs", "1")
	for _, first := range []uint64{72, 97} { // 'H', 'a'
		list := binary.LittleEndian.AppendUint64(nil, first)
		for i := uint64(100); i < 199; i++ {
			list = binary.LittleEndian.AppendUint64(list, i)
		}
		path := filepath.Join(small.dir, "consumers", fmt.Sprint(first))
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(filepath.Join(path, "subset"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < len(list); k += 24 { // in pieces, as a buffered writer may
			if _, err := f.Write(list[k:min(k+24, len(list))]); err != nil {
				t.Fatalf("a binary list starting with %d, bytes %d on: %v", first, k, err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatalf("a binary list starting with %d: %v", first, err)
		}
		if got := readFile(t, filepath.Join(path, "subset")); got != "list of 100\n" {
			t.Fatalf("a binary list starting with %d reads %q, want a list of 100", first, got)
		}
	}
	small.stop(t)
	d := startPlainDaemon(t, "--source", "synthetic:2000000", "--image-size", "8", "--batch-size", "4", "--epochs", "1")
	subset := func(name string) string {
		if err := os.Mkdir(filepath.Join(d.dir, "consumers", name), 0o755); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
		return filepath.Join(d.dir, "consumers", name, "subset")
	}
	// Longer than any subset of 2,000,000 samples can be as text (7
	// digits and a line end each): refused at the write past it.
	f, err := os.OpenFile(subset("long"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("1\n"), 1<<19) // 1 MiB
	var werr error
	for written := 0; werr == nil && written < 64<<20; written += len(chunk) {
		_, werr = f.Write(chunk)
	}
	f.Close()
	if !errors.Is(werr, syscall.EFBIG) {
		t.Fatalf("a list past what the dataset can need: %v, want EFBIG", werr)
	}
	if got := readFile(t, subset("long")); got != "all\n" {
		t.Fatalf("after a refused list the subset reads %q", got)
	}
	// Eight writers of 17 MiB each, together past the bound.
	var files []*os.File
	var full error
	for k := 0; k < 8 && full == nil; k++ {
		f, err := os.OpenFile(subset(fmt.Sprintf("w%d", k)), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		for written := 0; written < 17<<20; written += len(chunk) {
			if _, err := f.Write(chunk); err != nil {
				full = err
				break
			}
		}
	}
	if !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("lists written together past the bound: %v, want ENOSPC", full)
	}
	for _, f := range files {
		f.Close() // refused at close ("index 1 twice"): their room comes back
	}
	f, err = os.OpenFile(subset("after"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for written := 0; written < 17<<20; written += len(chunk) {
		if _, err := f.Write(chunk); err != nil {
			t.Fatalf("a list once the others closed: %v: their room did not come back", err)
		}
	}
	f.Close()
	d.stop(t)
}
