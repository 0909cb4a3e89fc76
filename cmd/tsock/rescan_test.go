package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// TestRescanGrowsTheData: with --rescan, files added to the folder
// mid-run (to a known class, and in a new class) join the data at a
// producer epoch boundary with new indices after the others: every epoch
// of the consumer is exactly the data as it was then, old or grown, the
// grown one from some epoch on; known samples keep their indices and
// labels (a --cache made for the old data grows with it); classes and
// status say what was added.
func TestRescanGrowsTheData(t *testing.T) {
	t.Parallel() // see parallelTests
	const n, epochs = 60, 3
	dir := producertest.Folder(t, n, 3)
	before, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	buffer := fmt.Sprint(2 * (batchfile.DataStart + 4*(16+3*8*8)))
	d := startDaemon(t, "--source", dir, "--rescan", "--cache", "16MiB", "--image-size", "8", "--batch-size", "4", "--epochs", fmt.Sprint(epochs), "--buffer", buffer)
	if err := os.Mkdir(filepath.Join(d.dir, "consumers", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := readInProcess(t, d, "c", func(j uint64) {
		if j != 0 {
			return
		}
		// Mid-epoch 0: three files in a known class, two in a new one.
		img, err := os.ReadFile(before.Name(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "zebra"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"class001/new-a.jpg", "class001/new-b.jpg", "class001/new-c.jpg", "zebra/z1.jpg", "zebra/z2.jpg"} {
			if err := os.WriteFile(filepath.Join(dir, name), img, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	old, grown := producertest.All(n), producertest.All(n+5)
	grew := -1
	for e, idx := range epochsOf(got) {
		switch sorted := slices.Sorted(slices.Values(idx)); {
		case slices.Equal(sorted, grown):
			if grew < 0 || e < grew {
				grew = e
			}
		case !slices.Equal(sorted, old):
			t.Errorf("epoch %d holds %v: neither the old data nor the grown one", e, sorted)
		}
	}
	if grew < 1 {
		t.Fatalf("the added files joined from epoch %d, want a later epoch than the first", grew)
	}
	labels := map[int64]int64{}
	for _, b := range got {
		for k, i := range b.Indices {
			labels[i] = b.Labels[k]
		}
	}
	for i := range n {
		if labels[int64(i)] != int64(before.Label(i)) {
			t.Fatalf("sample %d has label %d, it had %d", i, labels[int64(i)], before.Label(i))
		}
	}
	if labels[n] != 1 || labels[n+3] != 3 || labels[n+4] != 3 {
		t.Fatalf("labels of the added samples: %v", []int64{labels[n], labels[n+1], labels[n+2], labels[n+3], labels[n+4]})
	}
	if classes := readFile(t, filepath.Join(d.dir, "classes")); classes != "class000\nclass001\nclass002\nzebra\n" {
		t.Fatalf("classes: %q", classes)
	}
	if st := readFile(t, filepath.Join(d.dir, "status")); !strings.Contains(st, "rescans added: 5 samples (last 5, before producer epoch ") {
		t.Fatalf("status:\n%s", st)
	}
	d.stop(t)
}
