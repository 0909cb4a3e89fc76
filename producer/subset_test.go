package producer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// subsetOf is the subset of n samples for which has says yes.
func subsetOf(t *testing.T, form string, n int, has func(int) bool) *batchstore.Subset {
	t.Helper()
	sub, err := batchstore.NewSubset(form, n, has)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// ownEpochs reads consumer name's batches to the end and returns its
// epochs as the dataset indices of each, in order, checking that every
// batch is full but an epoch's last.
func ownEpochs(t *testing.T, ctx context.Context, store *batchstore.Store, name string, batchSize int, after func(batch int)) [][]int {
	t.Helper()
	var epochs [][]int
	var sizes [][]int
	for j := uint64(0); ; j++ {
		ref, err := store.Lookup(ctx, name, j, 1)
		if errors.Is(err, batchstore.ErrNotFound) {
			break
		}
		if err != nil {
			t.Errorf("%s: lookup %d: %v", name, j, err)
			return nil
		}
		l, err := store.OpenBatch(name, j)
		if err != nil {
			t.Errorf("%s: open %d: %v", name, j, err)
			return nil
		}
		var idx []int
		for _, p := range ref.Pieces {
			data := make([]byte, p.Blob.Size())
			if _, err := p.Blob.ReadAt(data, 0); err != nil {
				t.Error(err)
			}
			b, err := batchfile.ParseBatch(data)
			if err != nil {
				t.Errorf("%s: batch %d: %v", name, j, err)
				return nil
			}
			for _, x := range b.Indices[p.From:p.To] {
				idx = append(idx, int(x))
			}
		}
		l.Release()
		for len(epochs) <= ref.Epoch {
			epochs, sizes = append(epochs, nil), append(sizes, nil)
		}
		epochs[ref.Epoch] = append(epochs[ref.Epoch], idx...)
		sizes[ref.Epoch] = append(sizes[ref.Epoch], len(idx))
		if after != nil {
			after(int(j))
		}
	}
	// A negative batchSize allows short batches before an epoch's end
	// (Store.stuck).
	full := batchSize > 0
	batchSize = max(batchSize, -batchSize)
	for e, s := range sizes {
		for k, n := range s {
			if n == 0 || n > batchSize || (full && k < len(s)-1 && n != batchSize) {
				t.Errorf("%s: epoch %d: batch sizes %v, want %d but for the last", name, e, s, batchSize)
			}
		}
	}
	return epochs
}

// members lists the indices of [0, n) that sub holds.
func members(sub *batchstore.Subset, n int) []int {
	var out []int
	for i := range n {
		if sub.Has(i) {
			out = append(out, i)
		}
	}
	return out
}

// exactly fails unless each epoch holds the samples of want(epoch) once.
func exactly(t *testing.T, name string, epochs [][]int, count int, want func(epoch int) []int) {
	t.Helper()
	if len(epochs) != count {
		t.Errorf("%s: %d epochs, want %d", name, len(epochs), count)
		return
	}
	for e, got := range epochs {
		sorted := slices.Sorted(slices.Values(got))
		if w := want(e); !slices.Equal(sorted, w) {
			t.Errorf("%s: epoch %d holds %v, want %v", name, e, sorted, w)
		}
	}
}

// rig is a producer and store that consumers with subsets read at once.
type rig struct {
	t      *testing.T
	store  *batchstore.Store
	p      *producer.Producer
	ctx    context.Context
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	wg     sync.WaitGroup
	got    map[string][][]int // each consumer's epochs, once read
}

// newRig makes a producer of cfg over a buffer of buffer batches; run
// starts it.
func newRig(t *testing.T, cfg producer.Config, buffer int64) *rig {
	t.Helper()
	store := batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()*buffer))
	t.Cleanup(func() { store.Close() })
	p, err := producer.New(cfg, store, memfile.NewMemFD())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return &rig{t: t, store: store, p: p, ctx: ctx, cancel: cancel, done: make(chan error, 1), got: map[string][][]int{}}
}

// join adds consumer name with its batch size (0: the producer's) and
// subset; safe to call from a reader.
func (r *rig) join(name string, size int, sub *batchstore.Subset) {
	if err := r.store.Join(name); err != nil {
		r.t.Error(err)
	}
	if size > 0 {
		if err := r.store.SetBatchSize(name, size); err != nil {
			r.t.Error(err)
		}
	}
	if err := r.store.SetSubset(name, sub); err != nil {
		r.t.Error(err)
	}
}

func (r *rig) run() { go func() { r.done <- r.p.Run(r.ctx) }() }

// read reads consumer name to its end in a goroutine, calling after with
// each batch number read.
func (r *rig) read(name string, size int, after func(int)) {
	r.wg.Go(func() {
		e := ownEpochs(r.t, r.ctx, r.store, name, size, after)
		r.mu.Lock()
		r.got[name] = e
		r.mu.Unlock()
	})
}

// wait waits for every reader, then stops the producer.
func (r *rig) wait() map[string][][]int {
	r.wg.Wait()
	r.cancel()
	<-r.done
	return r.got
}

// TestSubsetsGiveExactEpochsOfTheirOwn: consumers with overlapping and
// disjoint subsets (folds, a holdout, everything) and their own batch
// sizes, one joining late and one changing its subset after its first
// batch, each get exact epochs of their own subset; the change applies
// from a later epoch of its, never inside one.
func TestSubsetsGiveExactEpochsOfTheirOwn(t *testing.T) {
	const n, epochs = 60, 3
	r := newRig(t, producertest.Config(source.NewSynthetic(n, 4), 8, epochs, 2), 10)
	fold := subsetOf(t, "fold 3/5", n, func(i int) bool { return i%5 != 2 })
	holdout := subsetOf(t, "holdout 3/5", n, func(i int) bool { return i%5 == 2 })
	low := subsetOf(t, "low", n, func(i int) bool { return i < 25 })
	high := subsetOf(t, "high", n, func(i int) bool { return i >= 40 })
	r.join("all", 8, nil)
	r.join("fold", 5, fold)
	r.join("holdout", 3, holdout)
	r.join("switch", 4, low)
	r.run()
	r.read("all", 8, nil)
	r.read("fold", 5, func(j int) {
		if j == 3 { // a late joiner with a subset, mid-epoch
			r.join("late", 0, holdout)
			r.read("late", 8, nil)
		}
	})
	r.read("holdout", 3, nil)
	r.read("switch", 4, func(j int) {
		if j == 0 {
			if err := r.store.SetSubset("switch", high); err != nil {
				t.Error(err)
			}
		}
	})
	got := r.wait()
	all := members(nil, n)
	exactly(t, "all", got["all"], epochs, func(int) []int { return all })
	exactly(t, "fold", got["fold"], epochs, func(int) []int { return members(fold, n) })
	exactly(t, "holdout", got["holdout"], epochs, func(int) []int { return members(holdout, n) })
	exactly(t, "late", got["late"], epochs, func(int) []int { return members(holdout, n) })
	sw := got["switch"]
	if len(sw) != epochs {
		t.Fatalf("switch: %d epochs", len(sw))
	}
	changed, err := producertest.Switched(sw, members(low, n), members(high, n))
	if err != nil {
		t.Errorf("switch: %v", err)
	}
	if changed < 1 {
		t.Errorf("switch: the change applied from epoch %d, want a later epoch than the first", changed)
	}
}

// TestSubsetsAloneMakeOnlyWhatTheyWant: with every consumer on a subset,
// the producer makes only the samples some subset holds, each once per
// producer epoch however many consumers share it; a subset that moves
// to samples no epoch held before still gets exact epochs.
func TestSubsetsAloneMakeOnlyWhatTheyWant(t *testing.T) {
	const n, epochs = 80, 3
	r := newRig(t, producertest.Config(source.NewSynthetic(n, 4), 8, epochs, 2), 12)
	low := subsetOf(t, "low", n, func(i int) bool { return i < 20 })
	mid := subsetOf(t, "mid", n, func(i int) bool { return i >= 10 && i < 30 })
	far := subsetOf(t, "far", n, func(i int) bool { return i >= 60 })
	r.join("a", 0, low)
	r.join("b", 0, mid)
	r.join("c", 0, low)
	r.run()
	r.read("a", 8, nil)
	r.read("b", 8, nil)
	r.read("c", 8, func(j int) {
		if j == 0 {
			if err := r.store.SetSubset("c", far); err != nil {
				t.Error(err)
			}
		}
	})
	got := r.wait()
	p := r.p
	exactly(t, "a", got["a"], epochs, func(int) []int { return members(low, n) })
	exactly(t, "b", got["b"], epochs, func(int) []int { return members(mid, n) })
	if len(got["c"]) != epochs {
		t.Errorf("c: %d epochs, want %d", len(got["c"]), epochs)
	}
	changed := false
	for e, ep := range got["c"] {
		sorted := slices.Sorted(slices.Values(ep))
		switch {
		case slices.Equal(sorted, members(far, n)):
			changed = true
		case !changed && e == 0 && slices.Equal(sorted, members(low, n)):
		default:
			t.Errorf("c: epoch %d holds %v", e, sorted)
		}
	}
	// low ∪ mid is 30 samples; far adds 20 from some producer epoch on.
	// Without demand every epoch would make all 80.
	if made := p.Stats().Snapshot().Decoded; !changed || made > 30*epochs+20*(epochs+1) || made < 30*epochs {
		t.Errorf("%d samples made over the run (changed: %v): want those of the subsets alone, each once per producer epoch", made, changed)
	}
}

// A subset rewritten at every batch read applies: a newer subset replaces
// a pending one where it stands, or, where that one is bound to a planned
// producer epoch, follows it. Before, each write moved the pending change
// to the first unplanned producer epoch, ahead of the reader for good: a
// subset rewritten every 40 ms for 45 s never applied.
func TestARewrittenSubsetApplies(t *testing.T) {
	const n = 24
	cfg := producertest.Config(source.NewSyntheticSized(n, 2, 6, 10), 4, 6, 1)
	r := newRig(t, cfg, 8)
	r.join("c", 0, nil)
	half := func(k int) *batchstore.Subset {
		return subsetOf(t, fmt.Sprintf("holdout %d/2", k), n, func(i int) bool { return i%2 == k-1 })
	}
	r.run()
	writes := 0
	r.read("c", 4, func(int) {
		writes++
		if err := r.store.SetSubset("c", half(1+writes%2)); err != nil {
			t.Error(err)
		}
	})
	epochs := r.wait()["c"]
	if len(epochs) != 6 || len(epochs[0]) != n {
		t.Fatalf("%d epochs, the first of %d samples: want 6, the first whole", len(epochs), len(epochs[0]))
	}
	for _, e := range epochs[1:] {
		if len(e) == n/2 {
			return // a half applied
		}
	}
	t.Fatalf("after %d writes no epoch was a half: epoch sizes %v", writes, func() (s []int) {
		for _, e := range epochs {
			s = append(s, len(e))
		}
		return s
	}())
}
