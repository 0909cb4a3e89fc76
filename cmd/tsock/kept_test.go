package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tsock/tsock/producer/producertest"
)

// TestEvalMountDecodesOnce: a --transform eval mount (--keep auto: as
// much as --buffer) decodes its set once; every later epoch, of every
// consumer, is copied from what the first made, byte for byte the same;
// status, status.json and the metrics count it.
func TestEvalMountDecodesOnce(t *testing.T) {
	t.Parallel() // see parallelTests
	const n, epochs = 24, 3
	d := startDaemon(t, "--source", producertest.Folder(t, n, 3), "--transform", "eval", "--image-size", "8", "--batch-size", "6",
		"--epochs", "3")
	var outs []string
	for _, name := range []string{"a", "b"} {
		p, out := consume(t, d, name)
		if err := p.Wait(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		outs = append(outs, out)
	}
	for _, out := range outs {
		batches, _ := readCopies(t, out)
		perEpoch := len(batches) / epochs
		if len(batches) != epochs*perEpoch {
			t.Fatalf("%d batches for %d epochs", len(batches), epochs)
		}
		for i, b := range batches[perEpoch:] {
			if first := batches[i%perEpoch]; !bytes.Equal(b.Images, first.Images) || !slices.Equal(b.Indices, first.Indices) {
				t.Fatalf("batch %d differs from the first epoch's", perEpoch+i)
			}
		}
	}
	var doc statusDoc
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(d.dir, "status.json"))), &doc); err != nil {
		t.Fatal(err)
	}
	// b joined after a had read all: the producer made its epochs again,
	// and only the first of all was decoded.
	if doc.Kept == nil || doc.Kept.Samples != n || doc.Kept.Served != doc.Producer.Samples-n || doc.Producer.Samples < 2*epochs*n || doc.Kept.Refused != 0 {
		t.Fatalf("status.json kept: %+v (decoded %d)", doc.Kept, doc.Producer.Samples)
	}
	if st := readFile(t, filepath.Join(d.dir, "status")); !strings.Contains(st, fmt.Sprintf("24 samples made once and copied into later epochs (%d copies)", doc.Kept.Served)) {
		t.Fatalf("status:\n%s", st)
	}
	if m := readFile(t, filepath.Join(d.dir, "metrics")); !strings.Contains(m, fmt.Sprintf("tsock_kept_served_total %d\n", doc.Kept.Served)) {
		t.Fatalf("metrics:\n%s", m)
	}
	d.stop(t)
}
