package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/producer/producertest"
)

// TestClassSortedShardsMixThroughTheMount: tar shards written class after
// class (2 shards a class, as a conversion straight from a class-sorted
// folder writes them), a shard memory of 4.65 shards (ImageNet's ratio:
// 512 MiB of 110 MB shards) and the shard disk at its default: a
// consumer's batches hold at least 0.9 of the distinct labels a uniform
// shuffle's do, over two exact epochs, and status.json says so. The same
// mount with no shard disk (the memory's window of 2 shards: the order
// of shards) holds under half, and says so too.
func TestClassSortedShardsMixThroughTheMount(t *testing.T) {
	t.Parallel() // see parallelTests
	const images, classes, perShard, batch = 400, 20, 10, 16
	spec := producertest.Shards(t, producertest.Folder(t, images, classes), perShard)
	_, bytes := producertest.ShardFiles(t, spec)
	memory := fmt.Sprint(bytes * 465 / 100 / (images / perShard))
	uniform := uniformDistinct(images, classes, batch)
	for _, tc := range []struct {
		disk  []string
		mixed bool
	}{
		{[]string{"--shard-disk-dir", producertest.DiskDir(t)}, true},
		{[]string{"--shard-disk", "0"}, false},
	} {
		d := startDaemon(t, append([]string{"--source", spec, "--batch-size", fmt.Sprint(batch), "--image-size", "8",
			"--epochs", "2", "--shard-memory", memory}, tc.disk...)...)
		var doc statusDoc
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(d.dir, "status.json"))), &doc); err != nil {
			t.Fatal(err)
		}
		reader, out := consume(t, d, "c")
		if err := reader.Wait(); err != nil {
			t.Fatalf("consumer: %v", err)
		}
		batches, _ := readCopies(t, out)
		d.stop(t)
		checkExactEpochs(t, batches, images, 2)
		got := meanDistinct(batches)
		t.Logf("%v: %.2f distinct labels a batch of %d, a uniform shuffle's %.2f; status.json %+v; shards %+v", tc.disk, got, batch, uniform, doc.Shuffle, doc.Shards)
		if mixed := got >= 0.9*uniform; mixed != tc.mixed {
			t.Fatalf("%v: a batch holds %.2f distinct labels, a uniform shuffle's %.2f: mixed %v, want %v", tc.disk, got, uniform, mixed, tc.mixed)
		}
		if !tc.mixed && got > uniform/2 {
			t.Fatalf("%v: %.2f distinct labels of %.2f without the shard disk: the shards are not class-sorted", tc.disk, got, uniform)
		}
		if s := doc.Shuffle; s == nil || s.Batch != batch || (s.Distinct >= 0.9*s.Uniform) != tc.mixed || (s.Warning == "") != tc.mixed {
			t.Fatalf("%v: status.json shuffle %+v", tc.disk, doc.Shuffle)
		}
		if sh := doc.Shards; sh == nil || (sh.Disk > 0) != tc.mixed {
			t.Fatalf("%v: status.json shards %+v", tc.disk, doc.Shards)
		}
	}
}

// uniformDistinct is the expected number of distinct labels in a batch
// of batch samples drawn without replacement from n, classes of n/classes
// each: classes × (1 − C(n−n/classes, batch) / C(n, batch)).
func uniformDistinct(n, classes, batch int) float64 {
	none := 1.0 // the chance a batch holds none of a class
	for k := range batch {
		none *= float64(n-n/classes-k) / float64(n-k)
	}
	return float64(classes) * (1 - none)
}

// checkExactEpochs: batches hold epochs epochs of n samples, each once.
func checkExactEpochs(t *testing.T, batches []*batchfile.Batch, n, epochs int) {
	t.Helper()
	seen := map[[2]int]bool{}
	for _, b := range batches {
		for _, i := range b.Indices {
			key := [2]int{b.Epoch, int(i)}
			if seen[key] {
				t.Fatalf("epoch %d holds sample %d twice", b.Epoch, i)
			}
			seen[key] = true
		}
	}
	if len(seen) != n*epochs {
		t.Fatalf("%d samples over the epochs, want %d epochs of %d", len(seen), epochs, n)
	}
}

// meanDistinct is the mean number of distinct labels in the full batches.
func meanDistinct(batches []*batchfile.Batch) float64 {
	sum, n, size := 0, 0, 0
	for _, b := range batches {
		size = max(size, b.Samples())
	}
	for _, b := range batches {
		if b.Samples() < size {
			continue
		}
		labels := map[int64]bool{}
		for _, l := range b.Labels {
			labels[l] = true
		}
		sum, n = sum+len(labels), n+1
	}
	return float64(sum) / float64(max(n, 1))
}
