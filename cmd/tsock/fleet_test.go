package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs"
	"github.com/tsock/tsock/producer/producertest"
)

// fleetMember is one trial of a sparse sweep: its subset file's content
// (a binary list) and the dataset indices it holds.
type fleetMember struct {
	subset []byte
	want   []int
}

// sparseSweep is producertest.SparseSweep as subset files.
func sparseSweep(consumers, n int) []fleetMember {
	var out []fleetMember
	for _, want := range producertest.SparseSweep(consumers, n) {
		m := fleetMember{want: want}
		for _, x := range want {
			m.subset = binary.LittleEndian.AppendUint64(m.subset, uint64(x))
		}
		out = append(out, m)
	}
	return out
}

// readAllBatches reads consumer name's batches in order to the end, and
// returns the dataset indices of each of its epochs, and the batch
// number each came in (for a failure to show).
func readAllBatches(dir, name string) (map[int][]int, map[int][]uint64, error) {
	epochs, from := map[int][]int{}, map[int][]uint64{}
	err := eachBatch(dir, name, func(j uint64, b *batchfile.Batch) {
		for _, x := range b.Indices {
			epochs[b.Epoch] = append(epochs[b.Epoch], int(x))
			from[b.Epoch] = append(from[b.Epoch], j)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return epochs, from, nil
}

// readBatches reads consumer (or rank) name's batches through the mount
// until its end, and keeps them whole.
func readBatches(dir, name string) ([]*batchfile.Batch, error) {
	var out []*batchfile.Batch
	err := eachBatch(dir, name, func(_ uint64, b *batchfile.Batch) { out = append(out, b) })
	return out, err
}

// eachBatch reads consumer (or rank) name's batches through the mount in
// order until its end, handing each to got.
func eachBatch(dir, name string, got func(j uint64, b *batchfile.Batch)) error {
	for j := uint64(0); ; j++ {
		data, err := os.ReadFile(filepath.Join(dir, "consumers", name, fs.BatchName(j)))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: batch %d: %w", name, j, err)
		}
		b, err := batchfile.ParseBatch(data)
		if err != nil {
			return fmt.Errorf("%s: batch %d: %w", name, j, err)
		}
		got(j, b)
	}
}

// sparseFleetThroughTheMount: a sweep of many trials on sparse subsets
// in a small buffer. The mount fills its buffer before anyone joins;
// each trial then joins, sets its batch size and subset, and reads. Every
// one reads exact epochs of its subset: no hang, no refusal, whatever
// their number (before, 64 of them hung with the buffer full).
func sparseFleetThroughTheMount(t *testing.T, consumers int) {
	t.Parallel() // see parallelTests
	const n, epochs, batch = 4000, 2, 32
	buffer := 40 * int64(batchfile.NewLayout(64, 8).Size)
	// Small pictures: the buffer fills in a second, also under load (with
	// synthetic:N's photo-sized ones a loaded CI machine took over 20 s).
	// The fleet of 200 is the daemon's scale, plain-built; the fleet of
	// 64 runs the same paths race-built (plainTsockBinary).
	start := startDaemon
	if consumers > 64 {
		start = startPlainDaemon
	}
	d := start(t, "--source", producertest.Folder(t, n, 10), "--image-size", "8", "--batch-size", "64",
		"--epochs", fmt.Sprint(epochs), "--buffer", fmt.Sprint(buffer), "--workers", "2")
	waittest.Until(t, "the buffer full before anyone joins", func() bool {
		var doc statusDoc
		data, err := os.ReadFile(filepath.Join(d.dir, "status.json"))
		return err == nil && json.Unmarshal(data, &doc) == nil && doc.Buffer.Used+doc.Buffer.Reserved+int64(batchfile.NewLayout(64, 8).Size) > doc.Buffer.Limit
	})
	sweep := sparseSweep(consumers, n)
	var wg sync.WaitGroup
	errs := make([]error, consumers)
	got := make([]map[int][]int, consumers)
	from := make([]map[int][]uint64, consumers)
	for i, m := range sweep {
		name := fmt.Sprint("trial-", i)
		cdir := filepath.Join(d.dir, "consumers", name)
		if err := os.Mkdir(cdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cdir, "batch_size"), []byte(fmt.Sprintln(batch)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cdir, "subset"), m.subset, 0o644); err != nil {
			t.Fatalf("%s: subset of %d samples refused: %v\n%s", name, len(m.want), err, readFile(t, filepath.Join(cdir, "status")))
		}
		wg.Go(func() { got[i], from[i], errs[i] = readAllBatches(d.dir, name) })
	}
	wg.Wait()
	for i, m := range sweep {
		if errs[i] != nil {
			t.Error(errs[i])
			continue
		}
		if len(got[i]) != epochs {
			t.Errorf("trial-%d: %d epochs, want %d", i, len(got[i]), epochs)
		}
		for e, idx := range got[i] {
			where := map[int][]uint64{} // index → the batches it came in
			for k, x := range idx {
				where[x] = append(where[x], from[i][e][k])
			}
			if slices.Sort(idx); !slices.Equal(idx, m.want) {
				var twice []string
				for x, js := range where {
					if len(js) > 1 {
						twice = append(twice, fmt.Sprintf("%d in batches %v", x, js))
					}
				}
				t.Errorf("trial-%d: epoch %d holds %d samples, want its %d once each; twice: %v; its status:\n%s", i, e, len(idx), len(m.want),
					twice, readFile(t, filepath.Join(d.dir, "consumers", fmt.Sprint("trial-", i), "status")))
			}
		}
	}
	d.stop(t)
}

func TestSparseFleetThroughTheMount64(t *testing.T)  { sparseFleetThroughTheMount(t, 64) }
func TestSparseFleetThroughTheMount200(t *testing.T) { sparseFleetThroughTheMount(t, 200) }
