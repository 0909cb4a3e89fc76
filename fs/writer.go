package fs

import (
	"bufio"
	"bytes"
	"os"
	"strconv"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// writer is the process that created a batch file in ingest/. The kernel
// sends a FLUSH for every close of every copy of a descriptor: a dup's,
// a forked child's (a subprocess closes what it inherits), an exiting
// process's. Only the writer's own last close may rule on the batch, and
// the kernel says nothing of which close that is; so the daemon asks
// /proc: the close is the writer's when it comes from the writer's
// process, and that process holds no other descriptor of the file.
type writer struct {
	tgid int    // the writer's process; 0 when it cannot be seen from here
	ino  uint64 // the batch file's inode number, as /proc/PID/fdinfo shows it
}

// writerOf is the writer of batch file ino, created by caller.
func writerOf(caller *fuse.Caller, ino uint64) writer {
	w := writer{ino: ino}
	if caller != nil {
		w.tgid, _ = threadGroup(caller.Pid)
	}
	return w
}

// lastClose says whether a FLUSH from caller is the writer's last close.
// Where the writer's process cannot be seen (a pid namespace the daemon
// is not in), every close is taken as the writer's, as before. Where the
// closer cannot be told, it is not: the batch is then ruled at the
// kernel's release, once every copy is closed.
func (w writer) lastClose(caller *fuse.Caller) bool {
	if w.tgid == 0 {
		return true
	}
	if caller == nil {
		return false
	}
	tgid, ok := threadGroup(caller.Pid)
	if !ok || tgid != w.tgid {
		return false
	}
	holds, err := holdsInode(tgid, w.ino)
	return err == nil && !holds
}

// threadGroup is the process of thread tid (FUSE requests carry the
// thread's id).
func threadGroup(tid uint32) (int, bool) {
	if tid == 0 {
		return 0, false
	}
	f, err := os.Open("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("Tgid:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			return n, err == nil && n > 0
		}
	}
	return 0, false
}

// holdsInode says whether process tgid has a descriptor open on inode
// ino. A close has taken its descriptor out of the table before the
// FLUSH, and an exiting process's table is gone by then: neither counts.
func holdsInode(tgid int, ino uint64) (bool, error) {
	dir := "/proc/" + strconv.Itoa(tgid) + "/fdinfo/"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	want := []byte("\nino:\t" + strconv.FormatUint(ino, 10) + "\n")
	for _, e := range entries {
		info, err := os.ReadFile(dir + e.Name())
		if err == nil && bytes.Contains(info, want) {
			return true, nil
		}
	}
	return false, nil
}
