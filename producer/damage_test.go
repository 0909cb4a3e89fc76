package producer_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/producertest"
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

func (h *hooked) Rescan() (int, error) {
	h.epoch++
	h.change(h.epoch)
	return h.Folder.Rescan()
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
	src, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		budget string
		fails  bool
	}{{"10%", true}, {"3", true}, {"100%", false}, {"50", false}} {
		cfg := producertest.Config(src, 5, 2, 1)
		if cfg.MaxSkipped, err = batchstore.ParseSkipBudget(tc.budget); err != nil {
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
		if !errors.Is(runErr, batchstore.ErrSkipBudget) || !errors.Is(readErr, batchstore.ErrProducerFailed) ||
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
	donor, err := source.ScanFolder(producertest.Folder(t, 1, 1))
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
	folder, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
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
		src = source.NewCache(src, 1<<30)
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
	other, err := source.ScanFolder(producertest.Folder(t, 6, 2))
	if err != nil {
		t.Fatal(err)
	}
	folder, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
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
	if st := p.Stats().Snapshot(); st.Skipped != 1 || !strings.Contains(strings.Join(st.RecentSkips, "\n"), deleted) {
		t.Fatalf("skips %d %v: want the deleted file, counted", st.Skipped, st.RecentSkips)
	}
}
