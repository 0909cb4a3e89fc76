package source

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestAnIndexPlantedBetweenCheckAndOpenIsRefused: another user links a
// crafted index (every label changed, a valid checksum) at the index
// path and unlinks it again, over and over, in a shared sticky
// directory, while the mount's user loads the index from that path. The
// crafted file is never read: its owner and mode are checked on the
// descriptor that is read, not on the path before it is opened. (Before:
// a path found empty by lstat was then opened by name and the crafted
// file read in 3 mounts of 26.)
func TestAnIndexPlantedBetweenCheckAndOpenIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root, to plant a file as a second user")
	}
	var paths []string
	dir := t.TempDir()
	for k := range 2 {
		paths = append(paths, writeShard(t, filepath.Join(dir, fmt.Sprintf("s%d.tar", k)), k))
	}
	ctx := context.Background()
	ixs := indexAll(ctx, paths, localShards{}, tarFormat{}, Options{})
	for k := range ixs {
		if ixs[k].broke != nil || len(ixs[k].samples) == 0 {
			t.Fatalf("shard %d indexed as %+v", k, ixs[k])
		}
		for i := range ixs[k].samples {
			ixs[k].samples[i].Label = 7 // the crafted word: every sample class 7
		}
	}
	planted := filepath.Join(t.TempDir(), "crafted.idx")
	if err := os.WriteFile(planted, encodeIndex(paths, ixs), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(planted, 65534, 65534); err != nil { // the second user's file
		t.Fatal(err)
	}
	shared := t.TempDir()
	if err := os.Chmod(shared, os.ModeSticky|0o777); err != nil { // as /tmp
		t.Fatal(err)
	}
	index := filepath.Join(shared, "team.idx")
	var stop atomic.Bool
	var links atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { // the second user, linking and unlinking as fast as it can
		for !stop.Load() {
			if os.Link(planted, index) == nil {
				links.Add(1)
			}
			os.Remove(index)
		}
	})
	defer func() { stop.Store(true); wg.Wait() }()
	loads, refused := 0, 0
	for ; loads < 20000 && (loads < 2000 || links.Load() < 2000); loads++ {
		got, err := loadIndex(ctx, index, paths, localShards{})
		if got != nil {
			t.Fatalf("load %d read the second user's index (labels %d, …)", loads, got[0].samples[0].Label)
		}
		if err != nil {
			refused++
		}
	}
	t.Logf("%d loads while the file was linked %d times: %d refused, none read", loads, links.Load(), refused)
	if refused == 0 || links.Load() == 0 {
		t.Fatalf("the race never ran: %d loads, %d links, %d refused", loads, links.Load(), refused)
	}
}

// writeShard writes a WebDataset shard of 3 samples of class label.
func writeShard(t *testing.T, path string, label int) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := tar.NewWriter(f)
	for m := range 3 {
		for _, member := range []struct{ ext, data string }{{".jpg", "not decoded here"}, {".cls", fmt.Sprint(label)}} {
			if err := w.WriteHeader(&tar.Header{Name: fmt.Sprintf("k%d-%d%s", label, m, member.ext), Mode: 0o644, Size: int64(len(member.data)), Format: tar.FormatUSTAR}); err != nil {
				t.Fatal(err)
			}
			w.Write([]byte(member.data))
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
