package producer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/skipbudget"
	"github.com/tsock/tsock/producer/source"
)

// hooked is a folder whose rescan (at each producer epoch boundary,
// before the epoch is planned) first runs a change to the files: the
// moment a writer may change them, without a race with the pipeline.
type hooked struct {
	*source.Folder
	epoch  int
	change func(epoch int)
}

func (h *hooked) Rescan(ctx context.Context) (int, error) {
	h.epoch++
	h.change(h.epoch)
	return h.Folder.Rescan(ctx)
}

// run produces cfg (a store of three batches) to its end or its failure:
// the batches consumer c read, the producer's error, and the consumer's
// last lookup's.
func run(t *testing.T, cfg producer.Config) (got []*batchfile.Batch, p *producer.Producer, runErr, readErr error) {
	t.Helper()
	r := producertest.StartProducer(t, cfg, time.Minute)
	got, readErr = r.Read(t, nil)
	r.Cancel()
	return got, r.P, <-r.Done, readErr
}

// byEpoch is the dataset indices read in each epoch.
func byEpoch(batches []*batchfile.Batch) map[int][]int64 {
	out := map[int][]int64{}
	for _, b := range batches {
		out[b.Epoch] = append(out[b.Epoch], b.Indices...)
	}
	return out
}

// Past --max-skipped the run fails loudly: the consumer's wait ends in
// the producer's failure naming the budget, never in an epoch of what is
// left; within it, the skips are counted and the epochs exact.
func TestSkipBudgetFailsTheRun(t *testing.T) {
	dir := producertest.Folder(t, 12, 3)
	bad, _ := producertest.BadFiles(t, dir, "class001")
	src, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		budget string
		fails  bool
	}{{"10%", true}, {"3", true}, {"100%", false}, {"50", false}} {
		cfg := producertest.Config(src, 5, 2, 1)
		if cfg.MaxSkipped, err = skipbudget.Parse(tc.budget); err != nil {
			t.Fatal(err)
		}
		got, p, runErr, readErr := run(t, cfg)
		if !tc.fails {
			want := producertest.Stream{Good: producertest.Without(src, bad), Label: src.Label, BatchSize: 5, Epochs: 2}
			if err := want.Check(got); err != nil || runErr != nil || readErr != nil {
				t.Fatalf("--max-skipped %s: %v, producer %v, reading %v", tc.budget, err, runErr, readErr)
			}
			continue
		}
		if !errors.Is(runErr, skipbudget.ErrExceeded) || !errors.Is(readErr, batchstore.ErrProducerFailed) ||
			!strings.Contains(readErr.Error(), "--max-skipped "+tc.budget) {
			t.Fatalf("--max-skipped %s with %d of %d bad: producer %v, reading ended in %v", tc.budget, len(bad), src.Len(), runErr, readErr)
		}
		if n := len(byEpoch(got)[1]); n != 0 {
			t.Fatalf("--max-skipped %s: a second epoch of %d samples was delivered", tc.budget, n)
		}
		if p.Stats().Snapshot().Failure == "" {
			t.Fatalf("--max-skipped %s: the producer's status says no failure", tc.budget)
		}
	}
}

// A file copied into a --rescan folder and listed while half written is
// skipped then, and tried again once its size or mtime changed: the next
// epoch holds it. Before, it was skipped for the rest of the run.
func TestRescanTriesAHalfWrittenFileAgain(t *testing.T) {
	dir := producertest.Folder(t, 8, 2)
	donor, err := source.Open(context.Background(), producertest.Folder(t, 1, 1), source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(donor.Name(0))
	if err != nil {
		t.Fatal(err)
	}
	late := filepath.Join(dir, "class001", "zz-late.jpg")
	if err := os.WriteFile(late, whole[:len(whole)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	folder := producertest.OpenFolder(t, dir)
	for _, cached := range []bool{false, true} { // --cache must not serve the half it kept
		if err := os.WriteFile(late, whole[:len(whole)/2], 0o644); err != nil {
			t.Fatal(err)
		}
		halfWrittenRetried(t, folder, late, whole, cached)
	}
}

func halfWrittenRetried(t *testing.T, folder *source.Folder, late string, whole []byte, cached bool) {
	var src source.Source = &hooked{Folder: folder, change: func(epoch int) {
		if epoch == 1 { // the copy completes before epoch 1 is planned
			if err := os.WriteFile(late, whole, 0o644); err != nil {
				t.Error(err)
			}
		}
	}}
	if cached {
		src = producertest.Cache(t, src, 1<<30, "")
	}
	cfg := producertest.Config(src, 3, 2, 1)
	cfg.Rescan = true
	got, p, runErr, readErr := run(t, cfg)
	if runErr != nil || readErr != nil {
		t.Fatalf("cache %v: producer %v, reading %v", cached, runErr, readErr)
	}
	idx := int64(slices.Index(func() []string {
		var names []string
		for i := 0; i < folder.Len(); i++ {
			names = append(names, folder.Name(i))
		}
		return names
	}(), late))
	epochs := byEpoch(got)
	if slices.Contains(epochs[0], idx) || !slices.Contains(epochs[1], idx) || len(epochs[1]) != folder.Len() {
		t.Fatalf("cache %v: the late file (index %d) in epoch 0: %v; in epoch 1: %v (want it there, %d samples)", cached, idx, epochs[0], epochs[1], folder.Len())
	}
	if n := p.Stats().Skipped(); n != 0 {
		t.Fatalf("cache %v: %d skipped after the file was complete", cached, n)
	}
}

// What --keep serves is what the source holds: a file rewritten after
// the first epoch is made again from its new bytes, and a file deleted is
// skipped and counted, never served from the copy kept of it.
func TestKeptSamplesFollowTheirFiles(t *testing.T) {
	dir := producertest.Folder(t, 6, 2)
	other, err := source.Open(context.Background(), producertest.Folder(t, 6, 2), source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	folder := producertest.OpenFolder(t, dir)
	rewritten, deleted := folder.Name(1), folder.Name(4)
	src := &hooked{Folder: folder, change: func(epoch int) {
		if epoch == 1 {
			data, err := os.ReadFile(other.Name(3)) // another picture
			if err == nil {
				err = os.WriteFile(rewritten, data, 0o644)
			}
			if err == nil {
				err = os.Remove(deleted)
			}
			if err != nil {
				t.Error(err)
			}
		}
	}}
	cfg := producertest.Config(src, 6, 2, 1)
	cfg.Transform, cfg.Keep, cfg.Rescan = pipeline.Eval, 1<<20, true
	got, p, runErr, readErr := run(t, cfg)
	if runErr != nil || readErr != nil || len(got) != 2 {
		t.Fatalf("%d batches, producer %v, reading %v", len(got), runErr, readErr)
	}
	sample := 3 * 12 * 12
	pixels := func(b *batchfile.Batch, index int64) []byte {
		k := slices.Index(b.Indices, index)
		if k < 0 {
			return nil
		}
		return b.Images[k*sample : (k+1)*sample]
	}
	if a, b := pixels(got[0], 0), pixels(got[1], 0); a == nil || string(a) != string(b) {
		t.Fatal("an unchanged file's kept sample differs between epochs")
	}
	if a, b := pixels(got[0], 1), pixels(got[1], 1); b == nil || string(a) == string(b) {
		t.Fatal("the rewritten file's sample was served from the copy kept of its old bytes")
	}
	if pixels(got[1], 4) != nil {
		t.Fatal("the deleted file's sample was served from its kept copy")
	}
	// Under --rescan a file deleted leaves the dataset: removed, not a
	// skip counted against --max-skipped.
	if st := p.Stats().Snapshot(); st.Skipped != 0 || st.Removed != 1 {
		t.Fatalf("skips %d %v, removed %d: want the deleted file removed, not skipped", st.Skipped, st.RecentSkips, st.Removed)
	}
}

// shardsHooked is local shards whose plan of each epoch first runs a
// change to the files: the moment between two epochs.
type shardsHooked struct {
	*source.Shards
	plans  int
	change func(plan int)
}

func (h *shardsHooked) Schedule(order, next []int) {
	if order != nil {
		h.plans++
		h.change(h.plans)
	}
	h.Shards.Schedule(order, next)
}

// --keep over tar shards follows its shards as over a folder: a shard
// deleted after epoch 0 serves nothing from the copies kept of its
// samples in epoch 1; they fail as without --keep (skipped, counted).
func TestKeptSamplesFollowTheirShards(t *testing.T) {
	spec := producertest.Shards(t, producertest.Folder(t, 12, 3), 4)
	opened, err := source.Open(context.Background(), spec, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	shards := opened.(*source.Shards)
	deleted := filepath.Join(filepath.Dir(spec), "shard-001.tar")
	src := &shardsHooked{Shards: shards, change: func(plan int) {
		if plan == 2 {
			if err := os.Remove(deleted); err != nil {
				t.Error(err)
			}
		}
	}}
	cfg := producertest.Config(src, 12, 2, 1)
	cfg.Transform, cfg.Keep = pipeline.Eval, 1<<20
	got, p, runErr, readErr := run(t, cfg)
	if runErr != nil || readErr != nil {
		t.Fatalf("producer %v, reading %v", runErr, readErr)
	}
	epochs := byEpoch(got)
	if len(epochs[0]) != 12 {
		t.Fatalf("epoch 0 holds %d samples, want 12", len(epochs[0]))
	}
	for _, i := range epochs[1] {
		if shards.Shard(int(i)) == 1 {
			t.Fatalf("epoch 1 served sample %d of the deleted shard from its kept copy", i)
		}
	}
	if len(epochs[1]) != 8 {
		t.Fatalf("epoch 1 holds %v: want the 8 samples of the shards left", epochs[1])
	}
	if st := p.Stats().Snapshot(); st.Skipped != 4 {
		t.Fatalf("%d skipped, want the deleted shard's 4, counted", st.Skipped)
	}
}

// What indexing left out counts against --max-skipped, over the dataset
// it should have been: groups without a label, and a shard cut short
// (its lost tail taken as what a whole shard holds less what it did).
// Past the budget the producer is not made at all.
func TestLeftOutAtIndexingCountsAgainstTheBudget(t *testing.T) {
	spec := producertest.Shards(t, producertest.Folder(t, 40, 2), 10)
	// Cut shard 3 in half: its last samples are lost.
	last := filepath.Join(filepath.Dir(spec), "shard-003.tar")
	st, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	opened, err := source.Open(context.Background(), spec, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sk := opened.(source.Skipper)
	lost := 40 - opened.Len()
	if lost < 4 || sk.LeftOut() != lost {
		t.Fatalf("a shard cut in half: %d samples of 40 indexed, %d counted as left out, want the %d lost", opened.Len(), sk.LeftOut(), lost)
	}
	for _, tc := range []struct {
		budget string
		fails  bool
	}{{fmt.Sprint(lost - 1), true}, {fmt.Sprint(lost), false}, {fmt.Sprintf("%d%%", lost*100/40-1), true}, {fmt.Sprintf("%d%%", (lost*100+39)/40), false}} {
		cfg := producertest.Config(opened, 10, 1, 1)
		if cfg.MaxSkipped, err = skipbudget.Parse(tc.budget); err != nil {
			t.Fatal(err)
		}
		store := batchstore.New(producer.StoreConfig(cfg, 1<<24))
		_, err := producer.New(cfg, store, memfile.NewMemFD())
		store.Close()
		if tc.fails != errors.Is(err, skipbudget.ErrExceeded) {
			t.Fatalf("--max-skipped %s with %d of 40 left out: %v", tc.budget, lost, err)
		}
	}
}

// Under --rescan, files removed from the folder leave the dataset: they
// are not samples lost, and never count against --max-skipped (here 0),
// whether the removal is seen by a read mid-epoch or by the next listing.
// Before, each vanished file was a skip and the run failed.
func TestRescanRemovedFilesLeaveTheData(t *testing.T) {
	dir := producertest.Folder(t, 20, 2)
	folder := producertest.OpenFolder(t, dir)
	gone := []int{3, 7, 12}
	src := &hooked{Folder: folder, change: func(epoch int) {
		if epoch == 1 { // between epochs 0 and 1: the listing sees it
			if err := os.Remove(folder.Name(gone[2])); err != nil {
				t.Error(err)
			}
		}
	}}
	cfg := producertest.Config(src, 5, 3, 1)
	cfg.Rescan = true
	var err error
	if cfg.MaxSkipped, err = skipbudget.Parse("0"); err != nil {
		t.Fatal(err)
	}
	r := producertest.StartProducer(t, cfg, time.Minute)
	got, readErr := r.Read(t, func(j uint64, _ *batchfile.Batch) {
		if j == 0 { // mid-epoch 0: a read may meet it
			for _, i := range gone[:2] {
				if err := os.Remove(folder.Name(i)); err != nil {
					t.Error(err)
				}
			}
		}
	})
	r.Cancel()
	if runErr := <-r.Done; runErr != nil || readErr != nil {
		t.Fatalf("producer %v, reading %v", runErr, readErr)
	}
	left := producertest.All(20)
	left = slices.DeleteFunc(left, func(i int) bool { return slices.Contains(gone, i) })
	epochs := byEpoch(got)
	for e := range 3 {
		seen := map[int64]int{}
		for _, i := range epochs[e] {
			seen[i]++
			if seen[i] > 1 {
				t.Fatalf("epoch %d holds sample %d twice", e, i)
			}
		}
		for _, i := range left {
			if seen[int64(i)] != 1 {
				t.Fatalf("epoch %d lacks sample %d: %v", e, i, epochs[e])
			}
		}
	}
	if len(epochs[2]) != len(left) {
		t.Fatalf("epoch 2 holds %v, want the %d files left", epochs[2], len(left))
	}
	if st := r.P.Stats().Snapshot(); st.Skipped != 0 || st.Removed != len(gone) {
		t.Fatalf("%d skipped %v, %d removed: want 0 skipped, %d removed", st.Skipped, st.RecentSkips, st.Removed, len(gone))
	}
}
