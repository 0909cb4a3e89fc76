package producer_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// sparseFleet is the shape of a sweep of many trials on sparse subsets
// (producertest.SparseSweep), all in batches of 32 where the producer
// makes 64. They
// join once the buffer is full (a mount prefills before anyone reads)
// and each sets its subset before its first read.
func sparseFleet(t *testing.T, consumers int, buffer int64) {
	const n, epochs, batch = fleetSamples, 2, 32
	r := newRig(t, producertest.Config(source.NewSyntheticSized(n, 4, 16, 32), 64, epochs, 2), buffer) // small pictures: the buffer fills in a second
	r.run()
	waittest.Until(t, "the buffer full before anyone joins", func() bool { return r.store.Snapshot().ProducerWaiting })
	subs := make([]*batchstore.Subset, consumers)
	for i, want := range producertest.SparseSweep(consumers, n) {
		subs[i] = subsetOf(t, fmt.Sprint("s", i), n, func(x int) bool { _, ok := slices.BinarySearch(want, x); return ok })
	}
	var refused int
	for i, sub := range subs {
		name := fmt.Sprint("t", i)
		if err := r.store.Join(name); err != nil {
			t.Fatal(err)
		}
		if err := r.store.SetBatchSize(name, batch); err != nil {
			t.Fatal(err)
		}
		if err := r.store.SetSubset(name, sub); errors.Is(err, batchstore.ErrBadSubset) {
			refused++
			t.Logf("%s refused: %v", name, err)
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		r.read(name, -batch, nil)
	}
	got := r.wait()
	var all *batchstore.Subset
	for i, sub := range subs {
		if e, ok := got[fmt.Sprint("t", i)]; ok {
			exactly(t, fmt.Sprint("t", i), e, epochs, func(int) []int { return members(sub, n) })
		}
		all = union(t, all, sub, n)
	}
	if refused > 0 {
		t.Errorf("%d of %d refused: every batch fits the buffer", refused, consumers)
	}
	// What the buffer held before anyone joined was made for all; from
	// then on each producer epoch holds what the subsets want together.
	// A consumer that joined mid-epoch reads epochs+1 producer epochs (a
	// stitched first one). Planned over all, epoch 0 alone made 20,000.
	made := r.p.Stats().Snapshot().Decoded
	if limit := uint64(buffer*64) + uint64((epochs+1)*all.Len()); made > limit {
		t.Errorf("%d samples made, want at most %d: the %d a buffer holds, then %d epochs of the %d the subsets want", made, limit, buffer*64, epochs+1, all.Len())
	}
	var short uint64
	for _, c := range r.store.Snapshot().Consumers {
		short += c.ShortBatches
	}
	t.Logf("%d consumers want %d of %d samples; %d made; %d short batches", consumers, all.Len(), n, made, short)
}

// union is what a and b hold together, of n samples.
func union(t *testing.T, a, b *batchstore.Subset, n int) *batchstore.Subset {
	return subsetOf(t, "union", n, func(x int) bool { return (a != nil && a.Has(x)) || b.Has(x) })
}

func TestSparseFleet64(t *testing.T)  { sparseFleet(t, 64, 48) }
func TestSparseFleet200(t *testing.T) { sparseFleet(t, 200, 48) }

// TestShardedEpochsAreExactForEveryConsumer: over shards read whole and
// shuffled shard by shard (tar shards, and Parquet files whose row groups
// are the pieces), a consumer on everything, one on a subset and one
// joining mid-epoch on another each read exact epochs of their own.
func TestShardedEpochsAreExactForEveryConsumer(t *testing.T) {
	const n, epochs = 48, 3
	for _, kind := range []string{"tar", "parquet"} {
		t.Run(kind, func(t *testing.T) {
			folder := producertest.Folder(t, n, 3)
			spec := producertest.Shards(t, folder, 8)
			if kind == "parquet" {
				spec = producertest.Parquet(t, folder, producertest.ParquetOptions{Files: 4, RowsPerGroup: 4})
			}
			src := producertest.OpenShards(t, spec)
			r := newRig(t, producertest.Config(src, 8, epochs, 2), 4)
			third := subsetOf(t, "third", n, func(i int) bool { return i%3 == 0 })
			odd := subsetOf(t, "odd", n, func(i int) bool { return i%2 == 1 })
			r.join("all", 8, nil)
			r.join("third", 4, third)
			r.run()
			r.read("third", 4, nil)
			r.read("all", 8, func(j int) {
				if j == 2 {
					r.join("late", 0, odd)
					r.read("late", 8, nil)
				}
			})
			got := r.wait()
			exactly(t, "all", got["all"], epochs, func(int) []int { return members(nil, n) })
			exactly(t, "third", got["third"], epochs, func(int) []int { return members(third, n) })
			exactly(t, "late", got["late"], epochs, func(int) []int { return members(odd, n) })
			if req := src.Stats().Reads; req == 0 {
				t.Error("no piece read whole")
			}
		})
	}
}

// TestListingBeforeTheSubsetChangesNothing: a trial's directory listed
// (ls, a file manager) between its mkdir and its subset computes batches
// where it was placed at the mkdir; the subset then places it anew, and
// what it reads is exact for where it now starts, not for where it was.
func TestListingBeforeTheSubsetChangesNothing(t *testing.T) {
	const n, epochs, batch, consumers = 4000, 2, 32, 48
	r := newRig(t, producertest.Config(source.NewSynthetic(n, 4), 64, epochs, 2), 40)
	r.run()
	waittest.Until(t, "the buffer full before anyone joins", func() bool { return r.store.Snapshot().ProducerWaiting })
	subs := make([]*batchstore.Subset, consumers)
	for i, want := range producertest.SparseSweep(consumers, n) {
		subs[i] = subsetOf(t, fmt.Sprint("s", i), n, func(x int) bool { _, ok := slices.BinarySearch(want, x); return ok })
	}
	listed := 0
	for i, sub := range subs {
		name := fmt.Sprint("t", i)
		if err := r.store.Join(name); err != nil {
			t.Fatal(err)
		}
		refs, err := r.store.Pending(name)
		if err != nil {
			t.Fatal(err)
		}
		listed += len(refs)
		if err := r.store.SetBatchSize(name, batch); err != nil {
			t.Fatal(err)
		}
		if err := r.store.SetSubset(name, sub); err != nil {
			t.Fatal(err)
		}
		r.read(name, -batch, nil)
	}
	got := r.wait()
	for i, sub := range subs {
		exactly(t, fmt.Sprint("t", i), got[fmt.Sprint("t", i)], epochs, func(int) []int { return members(sub, n) })
	}
	if listed == 0 {
		t.Fatal("no listing showed a batch: the test does not test what it means to")
	}
}
