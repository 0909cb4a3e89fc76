package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestShardBufsKeepWithinTheirLimits: buffers are mapped in memory up to
// its limit, then on the shard disk (unnamed files in its directory,
// their blocks allocated), never past either: a buffer that would pass
// both is refused (its samples are then read alone); a memory buffer
// given back is used again, or unmapped to make room for a larger one; a
// disk buffer given back is unmapped, its file gone; closing unmaps all,
// and a buffer given back after that is unmapped.
func TestShardBufsKeepWithinTheirLimits(t *testing.T) {
	const mb = 1 << 20
	dir := localDiskDir(t)
	p := &shardBufs{memLimit: 3 * mb, diskLimit: 4 * mb, dir: dir}
	a, err := p.get(2 * mb)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.get(2 * mb) // past the memory: on disk
	if err != nil {
		t.Fatal(err)
	}
	if mem, disk := p.Mapped(); mem != 2*mb || disk != 2*mb || !p.onDisk[&b[0]] || p.onDisk[&a[0]] {
		t.Fatalf("mapped %d in memory and %d on disk; want 2 MiB each, the second buffer on disk", mem, disk)
	}
	b[len(b)-1] = 7 // the disk's pages are writable and allocated
	if _, err := p.get(3 * mb); !errors.Is(err, errNoRoom) {
		t.Fatalf("a third buffer past both limits: %v, want errNoRoom", err)
	}
	p.put(a)
	c, err := p.get(mb) // the free one, used again
	if err != nil || &c[0] != &a[0] {
		t.Fatalf("a smaller buffer after one was given back: %v, not the one given back", err)
	}
	p.put(c)
	d, err := p.get(3 * mb) // the free 2 MiB is unmapped to make room in memory
	if err != nil {
		t.Fatal(err)
	}
	if mem, disk := p.Mapped(); mem != 3*mb || disk != 2*mb {
		t.Fatalf("mapped %d in memory and %d on disk after making room; want 3 and 2 MiB", mem, disk)
	}
	p.put(b) // a disk buffer given back: unmapped
	if _, disk := p.Mapped(); disk != 0 || p.diskPeak != 2*mb {
		t.Fatalf("%d bytes on disk after its buffer was given back (peak %d)", disk, p.diskPeak)
	}
	p.close()
	p.put(d) // given back after the last epoch: unmapped
	if mem, disk := p.Mapped(); mem != 0 || disk != 0 {
		t.Fatalf("after close: %d in memory, %d on disk still mapped", mem, disk)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the shard disk left %d files behind", len(left))
	}
}

// TestShardDiskRefusesWhatItCannotHold: a size named larger than the
// directory's free space, a directory that is not there, and a tmpfs are
// refused with the reason; auto takes half the free space, and none
// where the directory cannot serve.
func TestShardDiskRefusesWhatItCannotHold(t *testing.T) {
	dir := localDiskDir(t)
	shm := t.TempDir() // a tmpfs of the test's own: /dev/shm may be none
	if err := unix.Mount("tmpfs", shm, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mounting a tmpfs (the tests run as root): %v", err)
	}
	t.Cleanup(func() { unix.Unmount(shm, 0) })
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	free := int64(fs.Bavail) * fs.Bsize
	for _, tc := range []struct {
		space ShardSpace
		want  string
	}{
		{ShardSpace{Disk: free * 4, DiskDir: dir}, " free, the shard disk may take "},
		{ShardSpace{Disk: 1 << 20, DiskDir: dir + "/absent"}, "no such file or directory"},
		{ShardSpace{Disk: 1 << 20, DiskDir: shm}, "a file system in memory (tmpfs)"},
	} {
		if _, err := diskRoom(tc.space); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.space.DiskDir) {
			t.Errorf("%+v: %v, want an error naming the directory and %q", tc.space, err, tc.want)
		}
	}
	if got, err := diskRoom(ShardSpace{Disk: AutoDisk, DiskDir: dir}); err != nil || got < free/4 || got > free/2+free/8 {
		t.Errorf("auto: %d (%v), want about half of %d free", got, err, free)
	}
	if got, err := diskRoom(ShardSpace{Disk: AutoDisk, DiskDir: shm}); err != nil || got != 0 {
		t.Errorf("auto on a tmpfs: %d (%v), want none", got, err)
	}
}

// localDiskDir is a new directory on a local disk, removed at the test's
// end: /var/tmp, as the shard disk's default (t.TempDir's /tmp may be a
// tmpfs, which the shard disk refuses).
func localDiskDir(t testing.TB) string {
	dir, err := os.MkdirTemp("/var/tmp", "tsock-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestALocalShardsVersionIsTheSameOnEveryNode: a local shard's version
// is its inode, size and mtime, not its device, which a shared file
// system shows differently on each node (an index file shared by the
// nodes would be rewritten by each).
func TestALocalShardsVersionIsTheSameOnEveryNode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.tar")
	if err := os.WriteFile(path, make([]byte, 1024), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	version, size, err := localVersion(f)
	var st unix.Stat_t
	unix.Stat(path, &st)
	want := fmt.Sprintf("%d:1024:%d.%09d", st.Ino, st.Mtim.Sec, st.Mtim.Nsec)
	if err != nil || version != want || size != 1024 {
		t.Fatalf("version %q (size %d, %v), want %q: no device", version, size, err, want)
	}
}
