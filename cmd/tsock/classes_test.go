package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsock/tsock/producer/producertest"
)

// TestClassesFileNamesTheLabels: MOUNTPOINT/classes holds the source's
// class names, one a line in label order, a name with a newline
// Go-quoted so that it stays one line; status.json counts them.
func TestClassesFileNamesTheLabels(t *testing.T) {
	t.Parallel() // see parallelTests
	dir := producertest.Folder(t, 9, 3)
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 3 {
		t.Fatalf("%v, %v", entries, err)
	}
	for k, name := range []string{"a plain one", "b\nsplit", "c \"quoted\""} {
		if err := os.Rename(filepath.Join(dir, entries[k].Name()), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, "--source", dir, "--image-size", "8", "--batch-size", "3")
	want := "a plain one\n\"b\\nsplit\"\nc \"quoted\"\n"
	if got := readFile(t, filepath.Join(d.dir, "classes")); got != want {
		t.Fatalf("classes: %q, want %q", got, want)
	}
	if doc := readFile(t, filepath.Join(d.dir, "status.json")); !strings.Contains(doc, `"classes": 3,`) {
		t.Fatalf("status.json:\n%s", doc)
	}
	d.stop(t)
}
