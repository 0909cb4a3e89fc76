package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tsock/tsock/fs/fusetest"
)

// mkGroup makes consumers/name a group of world ranks of batch size per
// and claims every rank.
func mkGroup(t *testing.T, d *mountProc, name string, world, per int, dropLast bool) string {
	t.Helper()
	dir := filepath.Join(d.dir, "consumers", name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	drop := "0\n"
	if dropLast {
		drop = "1\n"
	}
	for file, value := range map[string]string{"world": fmt.Sprintf("%d\n", world), "batch_size": fmt.Sprintf("%d\n", per), "drop_last": drop} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	for r := range world {
		if err := os.Mkdir(filepath.Join(dir, fmt.Sprint(r)), 0o755); err != nil {
			t.Fatalf("claim rank %d: %v", r, err)
		}
	}
	return dir
}

// The ranks of a group read through the mount, beside a consumer of the
// whole data, exact epochs between them: every epoch each sample once
// across the ranks (the uneven tail dropped: fewer than world left out),
// every rank the same number of batches, a new deal each epoch; status
// shows the group and each rank. Bad writes are refused naming nothing
// changed.
func TestGroupThroughTheMount(t *testing.T) {
	fusetest.Need(t)
	t.Parallel() // see parallelTests
	const n, epochs, world = 46, 2, 3
	d := startDaemon(t, "--source", fmt.Sprintf("synthetic:%d", n), "--image-size", "8", "--batch-size", "4", "--epochs", fmt.Sprint(epochs))
	dir := mkGroup(t, d, "g", world, 2, true)
	if err := os.Mkdir(filepath.Join(d.dir, "consumers", "whole"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		what string
		err  error
		want syscall.Errno
	}{
		{"rank 3 of 3", os.Mkdir(filepath.Join(dir, "3"), 0o755), syscall.EINVAL},
		{"rank 1 again", os.Mkdir(filepath.Join(dir, "1"), 0o755), syscall.EEXIST},
		{"a rank named x", os.Mkdir(filepath.Join(dir, "x"), 0o755), syscall.EINVAL},
		{"world 4 after the ranks joined in 3", os.WriteFile(filepath.Join(dir, "world"), []byte("4\n"), 0o644), syscall.EINVAL},
		{"batch size 5 after they joined with 2", os.WriteFile(filepath.Join(dir, "batch_size"), []byte("5\n"), 0o644), syscall.EBUSY},
		{"drop_last 2", os.WriteFile(filepath.Join(dir, "drop_last"), []byte("2\n"), 0o644), syscall.EINVAL},
		{"removing the group with its ranks", os.Remove(dir), syscall.ENOTEMPTY},
	} {
		if !errors.Is(bad.err, bad.want) {
			t.Errorf("%s: %v, want %v", bad.what, bad.err, bad.want)
		}
	}
	if got := readFile(t, filepath.Join(dir, "world")); got != "3\n" {
		t.Fatalf("world after the refusals: %q", got)
	}
	var wg sync.WaitGroup
	got := make([]map[int][]int, world+1)
	batches := make([]map[int][]uint64, world+1)
	errs := make([]error, world+1)
	names := []string{"g/0", "g/1", "g/2", "whole"}
	for k, name := range names {
		wg.Go(func() {
			runtime.LockOSThread() // a lookup and its open from one thread
			got[k], batches[k], errs[k] = readAllBatches(d.dir, name)
		})
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", names[k], err)
		}
	}
	var deal [][]int
	for e := range epochs {
		seen := map[int]int{}
		steps := slices.Compact(slices.Clone(batches[0][e]))
		for r := range world {
			if s := slices.Compact(slices.Clone(batches[r][e])); len(s) != len(steps) {
				t.Fatalf("epoch %d: rank %d read %d batches, rank 0 %d", e, r, len(s), len(steps))
			}
			for _, x := range got[r][e] {
				seen[x]++
			}
		}
		missed, twice := 0, 0
		for x := range n {
			if seen[x] == 0 {
				missed++
			}
			twice += max(seen[x]-1, 0)
		}
		if missed != n%world || twice != 0 {
			t.Fatalf("epoch %d: %d samples left out (want %d), %d read twice", e, missed, n%world, twice)
		}
		if len(got[world][e]) != n {
			t.Fatalf("epoch %d: the whole-data consumer read %d samples", e, len(got[world][e]))
		}
		deal = append(deal, slices.Clone(got[0][e]))
	}
	if slices.Equal(deal[0], deal[1]) {
		t.Fatalf("rank 0 was dealt the same samples both epochs: %v", deal[0])
	}
	var doc struct {
		Consumers []struct {
			Name     string `json:"name"`
			World    int    `json:"world"`
			DropLast bool   `json:"drop_last"`
			Ranks    []struct {
				Rank        int    `json:"rank"`
				State       string `json:"state"`
				BatchesRead uint64 `json:"batches_read"`
			} `json:"ranks"`
		} `json:"consumers"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(d.dir, "status.json"))), &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range doc.Consumers {
		if c.Name != "g" {
			continue
		}
		if c.World != world || !c.DropLast || len(c.Ranks) != world || c.Ranks[2].State != "done" || c.Ranks[2].BatchesRead == 0 {
			t.Fatalf("status.json's group: %+v", c)
		}
	}
	if st := readFile(t, filepath.Join(d.dir, "status")); !strings.Contains(st, "g (a group of 3 ranks, batch size 2 each)") || !strings.Contains(st, "rank 2 of 3: done") {
		t.Fatalf("status does not show the group and its ranks:\n%s", st)
	}
}

// A rank whose process is killed fails its group at once: the kernel
// closes its alive file, and the other ranks' next reads fail with EIO,
// their status saying which rank went; the whole-data consumer reads on.
func TestAKilledRankFailsItsGroup(t *testing.T) {
	fusetest.Need(t)
	t.Parallel() // see parallelTests
	d := startDaemon(t, "--source", "synthetic:40", "--image-size", "8", "--batch-size", "4", "--epochs", "1")
	dir := mkGroup(t, d, "g", 2, 2, false)
	if err := os.Mkdir(filepath.Join(d.dir, "consumers", "whole"), 0o755); err != nil {
		t.Fatal(err)
	}
	alive, err := os.Open(filepath.Join(dir, "1", "alive"))
	if err != nil {
		t.Fatal(err)
	}
	victim, _ := startHolder(t, alive) // rank 1's process, holding alive
	alive.Close()
	if _, err := os.ReadFile(filepath.Join(dir, "0", "000000.safetensors")); err != nil {
		t.Fatal(err)
	}
	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	victim.Wait()
	// The kernel's release of the dead process's file reaches the daemon
	// after the process is gone: the state says when.
	deadline := time.Now().Add(10 * time.Second)
	for readFile(t, filepath.Join(dir, "0", "state")) != "evicted\n" {
		if time.Now().After(deadline) {
			t.Fatalf("rank 0 still %q 10 s after rank 1 was killed", readFile(t, filepath.Join(dir, "0", "state")))
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err = os.ReadFile(filepath.Join(dir, "0", "000001.safetensors"))
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("rank 0's next batch after rank 1 died: %v, want EIO", err)
	}
	if st := readFile(t, filepath.Join(dir, "0", "status")); !strings.Contains(st, "group failed: rank 1's process closed its alive file") {
		t.Fatalf("rank 0's status does not say why:\n%s", st)
	}
	whole, _, err := readAllBatches(d.dir, "whole")
	if err != nil || len(whole[0]) != 40 {
		t.Fatalf("the whole-data consumer after the group failed: %v, %d samples", err, len(whole[0]))
	}
}
