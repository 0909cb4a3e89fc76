package producertest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/producer/source"
)

// Stream is what one consumer is expected to receive.
type Stream struct {
	Good      []int         // dataset indices every epoch must hold once each
	Label     func(int) int // the label of a dataset index
	BatchSize int
	Epochs    int
}

// Check verifies batches, in the order a consumer read them: whole epochs
// in order, each holding every good sample exactly once with its label,
// batches numbered from 0 within an epoch, only the last one short.
func (s Stream) Check(batches []*batchfile.Batch) error {
	byEpoch := map[int][]*batchfile.Batch{}
	last := -1
	for i, b := range batches {
		if b.Epoch < last {
			return fmt.Errorf("batch %d: epoch %d after epoch %d", i, b.Epoch, last)
		}
		last = b.Epoch
		byEpoch[b.Epoch] = append(byEpoch[b.Epoch], b)
	}
	if len(byEpoch) != s.Epochs {
		return fmt.Errorf("got %d epochs, want %d", len(byEpoch), s.Epochs)
	}
	for e := 0; e < s.Epochs; e++ {
		if err := s.checkEpoch(e, byEpoch[e]); err != nil {
			return fmt.Errorf("epoch %d: %w", e, err)
		}
	}
	return nil
}

func (s Stream) checkEpoch(e int, batches []*batchfile.Batch) error {
	if len(batches) == 0 {
		return fmt.Errorf("no batches")
	}
	var got []int
	for i, b := range batches {
		if b.Index != i {
			return fmt.Errorf("batch %d says it is batch %d", i, b.Index)
		}
		if n := b.Samples(); n != s.BatchSize && i != len(batches)-1 || n > s.BatchSize || n == 0 {
			return fmt.Errorf("batch %d of %d has %d samples, batch size %d", i, len(batches), n, s.BatchSize)
		}
		for k, idx := range b.Indices {
			if want := s.Label(int(idx)); int(b.Labels[k]) != want {
				return fmt.Errorf("batch %d sample %d (index %d): label %d, want %d", i, k, idx, b.Labels[k], want)
			}
			got = append(got, int(idx))
		}
	}
	sort.Ints(got)
	want := append([]int(nil), s.Good...)
	sort.Ints(want)
	if len(got) != len(want) {
		return fmt.Errorf("%d samples, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("samples differ from the dataset at %d: got index %d, want %d", i, got[i], want[i])
		}
	}
	return nil
}

// All is 0..n-1.
func All(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// Without is the indices of src's samples whose names are not in skip.
func Without(src source.Source, skip []string) []int {
	var out []int
	for i := 0; i < src.Len(); i++ {
		if !slices.Contains(skip, src.Name(i)) {
			out = append(out, i)
		}
	}
	return out
}

// Switched is the first of epochs (each the dataset indices one epoch
// held, in any order) that holds after exactly, where every epoch before
// it holds before exactly and every one from it after; -1 if none holds
// after. An epoch that holds neither is an error: a subset changed inside
// an epoch, or lost or repeated a sample.
func Switched(epochs [][]int, before, after []int) (int, error) {
	switched := -1
	for e, ep := range epochs {
		sorted := slices.Sorted(slices.Values(ep))
		switch {
		case switched < 0 && slices.Equal(sorted, before):
		case slices.Equal(sorted, after):
			if switched < 0 {
				switched = e
			}
		default:
			return switched, fmt.Errorf("epoch %d holds %v: neither subset exactly", e, sorted)
		}
	}
	return switched, nil
}

// SparseSweep is the samples (of n) of each trial of a sweep on sparse
// subsets, in order: a third on x%64 == k (like holdouts k/64, k < 8), a
// third on random 1% lists (seeded), a third on x%16 == k (k < 2).
func SparseSweep(consumers, n int) [][]int {
	rng := rand.New(rand.NewPCG(7, 11))
	out := make([][]int, consumers)
	for i := range out {
		var has func(int) bool
		switch i % 3 {
		case 0:
			k := i / 3 % 8
			has = func(x int) bool { return x%64 == k }
		case 1:
			set := map[int]bool{}
			for len(set) < n/100 {
				set[rng.IntN(n)] = true
			}
			has = func(x int) bool { return set[x] }
		default:
			k := i / 3 % 2
			has = func(x int) bool { return x%16 == k }
		}
		for x := range n {
			if has(x) {
				out[i] = append(out[i], x)
			}
		}
	}
	return out
}
