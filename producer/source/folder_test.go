package source_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// listing is what a folder source lists: per class, its files' base names.
func listing(t *testing.T, f *source.Folder) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for i := 0; i < f.Len(); i++ {
		class := f.Classes()[f.Label(i)]
		out[class] = append(out[class], filepath.Base(f.Name(i)))
	}
	return out
}

// The folder source sees what torchvision's ImageFolder sees on a farm of
// symbolic links (the usual way ImageNet subsets are assembled): class
// folders that are links, and linked sub-folders, are followed; a link
// back to a folder above it is left out (torchvision would loop forever)
// and named. Before, linked classes were dropped and the labels shifted.
func TestSymlinkFarmListsAsItsCopy(t *testing.T) {
	real := producertest.Folder(t, 12, 3) // class000..class002, 4 images each
	farm := t.TempDir()
	for _, c := range []string{"class000", "class001"} {
		if err := os.Symlink(filepath.Join(real, c), filepath.Join(farm, c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(farm, "class002"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(real, "class002"), filepath.Join(farm, "class002", "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".", filepath.Join(farm, "class002", "loop")); err != nil {
		t.Fatal(err)
	}
	want, err := source.ScanFolder(real)
	if err != nil {
		t.Fatal(err)
	}
	got, err := source.ScanFolder(farm)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(listing(t, got)) != fmt.Sprint(listing(t, want)) || fmt.Sprint(got.Classes()) != fmt.Sprint(want.Classes()) {
		t.Fatalf("the farm lists\n%v\nits copy\n%v", listing(t, got), listing(t, want))
	}
	if left := got.Skipped(); len(left) != 1 || !strings.Contains(left[0], "loop") {
		t.Fatalf("left out: %q, want the loop, named", left)
	}
}

// An entry that cannot be listed (here a path past PATH_MAX, as deep trees
// make) is left out, counted and named; the rest is listed, at the mount
// and at every rescan. Only a root that cannot be read fails.
func TestUnlistableEntriesAreLeftOutAndNamed(t *testing.T) {
	dir := producertest.Folder(t, 8, 2)
	deep := deepDir(t, filepath.Join(dir, "class001"))
	f, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatalf("a class with an unlistable entry failed the mount: %v", err)
	}
	if f.Len() != 8 {
		t.Fatalf("%d samples listed, want the 8 images", f.Len())
	}
	left := f.Skipped()
	if len(left) != 1 || !strings.Contains(left[0], deep[:40]) || !strings.Contains(left[0], "file name too long") {
		t.Fatalf("left out: %q", left)
	}
	// A rescan still grows the folder past it.
	src, err := os.ReadFile(f.Name(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "class001", "zz-new.jpg"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if added, err := f.Rescan(context.Background()); err != nil || added != 1 {
		t.Fatalf("rescan past an unlistable entry: %d added, %v", added, err)
	}
	if _, err := source.ScanFolder(filepath.Join(dir, "nowhere")); err == nil {
		t.Fatal("a root that cannot be read was listed")
	}
}

// deepDir makes under dir a chain of folders whose path passes PATH_MAX
// (each made relative to the one above, as the kernel allows) and returns
// the first one's path.
func deepDir(t *testing.T, dir string) string {
	t.Helper()
	name := strings.Repeat("d", 250)
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 { // 20 × 251 bytes: past 4096
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	t.Cleanup(func() { os.RemoveAll(filepath.Join(dir, name)) })
	return filepath.Join(dir, name)
}

// A link out of the source is followed (a farm's classes live elsewhere)
// by rules: a link to the source's own directory or one above it ("/"
// above all) would list the source again or the whole machine, and a
// pseudo file system (/proc, /sys, /dev) holds no dataset and can act
// when read: each is left out and named, and the listing is as without
// them. Before, a class holding a link to "/" listed the whole machine.
func TestALinkOutOfTheSourceIsFollowedByRules(t *testing.T) {
	dir := producertest.Folder(t, 12, 3)
	want, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	class := filepath.Join(dir, "class001")
	for name, target := range map[string]string{"root": "/", "parent": filepath.Dir(dir), "self": dir, "proc": "/proc/self", "sys": "/sys/kernel", "dev": "/dev"} {
		if err := os.Symlink(target, filepath.Join(class, name)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(listing(t, got)) != fmt.Sprint(listing(t, want)) {
		t.Fatalf("with links out of the source it lists\n%v\nwithout\n%v", listing(t, got), listing(t, want))
	}
	left := strings.Join(got.Skipped(), "\n")
	for name, why := range map[string]string{"root": "one above it", "parent": "one above it", "self": "one above it", "proc": "pseudo file system", "sys": "pseudo file system", "dev": "pseudo file system"} {
		if !strings.Contains(left, filepath.Join(class, name)+": ") || !strings.Contains(left, why) {
			t.Errorf("the link %s is not left out for %q:\n%s", name, why, left)
		}
	}
}

// A listing stops when the run does (SIGTERM to the mount ends ctx).
func TestAListingStopsWithTheRun(t *testing.T) {
	dir := producertest.Folder(t, 4, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := source.Open(ctx, dir, source.Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a listing after the run stopped: %v, want context.Canceled", err)
	}
}

// What a listing leaves out is named up to a bound over the whole scan,
// not per class: a tree of many unlistable entries spread over classes
// must not take the daemon's memory.
func TestLeftOutIsBoundedOverTheScan(t *testing.T) {
	dir := producertest.Folder(t, 6, 3)
	for c := range 3 {
		for k := range 60 {
			if err := os.Symlink(".", filepath.Join(dir, fmt.Sprintf("class%03d", c), fmt.Sprintf("loop%02d", k))); err != nil {
				t.Fatal(err)
			}
		}
	}
	f, err := source.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if left := f.Skipped(); len(left) != 101 || left[100] != "and more" {
		t.Fatalf("%d entries named for 180 left out: want 100 and a last line", len(left))
	}
}
