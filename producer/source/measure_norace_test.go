//go:build !race

// Tests whose verdict is a statistic or a memory figure: the race
// detector changes what allocations cost and slows them several times,
// and watches nothing they run that the race-built tests do not run too.
// scripts/test.sh runs them in a plain build beside go test -race (the
// files with this build line are its list).

package source_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tsock/tsock/producer/source"
)

// TestHostileFilesCostWhatTheyHold: the hostile suite (writeHostile: a
// footer claiming a terabyte for a chunk, a footer of 500,000 empty row
// groups, zstd pages of 1 GiB of zeros whose headers say 1000 bytes or
// 1 GiB, a page whose levels are a run of 2^30) beside a good file, in a
// shard memory of 64 MiB and an automatic shard disk: opening them
// allocates about their footers' bytes and keeps nothing of the empty
// groups, no sample's read allocates more than the shard memory and a few
// MiB (however it is read: in pieces or alone), the good rows are all
// served and only the bombs' rows fail. (Before: 1.62 GiB at open and 934
// MiB kept for the empty groups; the terabyte claim sized the buffers
// and the disk, and the page honestly of 1 GiB was then decoded in
// memory: the daemon peaked at 1.1 GiB.)
func TestHostileFilesCostWhatTheyHold(t *testing.T) {
	dir := t.TempDir()
	writeHostile(t, dir)
	var footers int64
	for _, name := range []string{"c-empty-groups.parquet"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		footers += int64(binary.LittleEndian.Uint32(data[len(data)-8:]))
	}
	const memory = 64 << 20
	var src source.Source
	var heapBefore, heapAfter runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&heapBefore)
	opened := allocated(func() {
		var err error
		src, err = source.Open(context.Background(), filepath.Join(dir, "*.parquet"),
			source.Options{Shards: &source.ShardSpace{Memory: memory, Disk: source.AutoDisk, DiskDir: t.TempDir(), Batch: 4}})
		if err != nil {
			t.Fatal(err)
		}
	})
	runtime.GC()
	runtime.ReadMemStats(&heapAfter)
	kept := int64(heapAfter.HeapAlloc) - int64(heapBefore.HeapAlloc)
	t.Logf("opening footers of %d KiB allocated %d KiB and kept %d KiB", footers>>10, opened>>10, kept>>10)
	if opened > uint64(2*footers+16<<20) || kept > 4<<20 {
		t.Errorf("opening footers of %d MiB allocated %d MiB and kept %d KiB", footers>>20, opened>>20, kept>>10)
	}
	good, err := source.Open(context.Background(), filepath.Join(dir, "a-good.parquet"), source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if src.Len() != 6*good.Len() {
		t.Fatalf("%d samples, want the good file's %d six times; left out: %v", src.Len(), good.Len(), src.(source.Skipper).Skipped())
	}
	order := make([]int, src.Len())
	for i := range order {
		order[i] = i
	}
	if sh, ok := source.As[source.Sharded](src); ok {
		sh.Schedule(order, nil)
		defer sh.Schedule(nil, nil)
	}
	var scratch []byte
	var most uint64
	failed := map[string]int{}
	epoch := allocated(func() {
		for _, i := range order {
			var b []byte
			var err error
			n := allocated(func() { b, err = src.Encoded(context.Background(), i, &scratch) })
			most = max(most, n)
			file, row := filepath.Base(src.Name(i)[:strings.LastIndex(src.Name(i), ":")]), i%good.Len()
			want, werr := good.Encoded(context.Background(), row, new([]byte))
			switch {
			case werr != nil:
				t.Fatal(werr)
			case err != nil:
				failed[file]++
			case row >= 5 && strings.HasPrefix(file, "f-"):
				if string(b) != "x" {
					t.Errorf("%s: %q, want the run's page's x", src.Name(i), b)
				}
			case !bytes.Equal(b, want):
				t.Fatalf("sample %d (%s): %d bytes, want %d", i, src.Name(i), len(b), len(want))
			}
		}
	})
	t.Logf("a sample's read allocated %d KiB at most, the epoch %d KiB (its reads ahead included)", most>>10, epoch>>10)
	if epoch > memory+16<<20 {
		t.Errorf("the epoch allocated %d MiB, over the shard memory's %d and 16", epoch>>20, memory>>20)
	}
	if most > memory+16<<20 {
		t.Errorf("a sample's read allocated %d MiB, over the shard memory's %d and 16", most>>20, memory>>20)
	}
	if want := map[string]int{"d-zstd-gigabyte-says-1000.parquet": 5, "e-zstd-gigabyte-says-so.parquet": 5}; fmt.Sprint(failed) != fmt.Sprint(want) {
		t.Errorf("samples failed, by file: %v, want the bombs' row groups' %v", failed, want)
	}
}

// allocated is what f allocates, all told.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
