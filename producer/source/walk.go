package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// walker lists a folder source's class directories. It follows symbolic
// links to directories, as torchvision's ImageFolder does (os.walk with
// followlinks=True: a class assembled as a farm of links is the usual way
// ImageNet subsets are made), by these rules:
//   - a directory met again below itself is left out (a loop);
//   - a directory that holds the source (the source's own directory or
//     one above it, "/" included) is left out: following it would list
//     the source again, or the whole machine;
//   - a pseudo file system (/proc, /sys, /dev and their kin: no files of
//     a dataset live there, and a read can act or block) is never entered;
//
// each left out and named. It stops when ctx ends (a signal to the
// mount) and says how far it got on the log every few seconds, so that a
// listing that meets a surprise is seen, not silent.
type walker struct {
	ctx     context.Context
	opts    Options        // its Progress is told each directory
	above   map[dirID]bool // the source's directory and every one above it
	leftOut *[]string      // the scan's: what it leaves out, named (bounded by noteLeftOut)
	dirs    int            // directories listed so far
	files   int            // image files found so far
	mu      sync.Mutex
	at      string // the directory being listed, for the progress line
	done    chan struct{}
	wg      sync.WaitGroup
}

// walkProgressEvery is how often a long listing says how far it got.
var walkProgressEvery = 2 * time.Second

func newWalker(ctx context.Context, root string, opts Options, leftOut *[]string) (*walker, error) {
	w := &walker{ctx: ctx, opts: opts, above: map[dirID]bool{}, leftOut: leftOut, done: make(chan struct{})}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", root, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for dir := abs; ; dir = filepath.Dir(dir) {
		if st, err := os.Stat(dir); err == nil {
			w.above[idOf(st)] = true
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	w.wg.Go(w.progress)
	return w, nil
}

// stop ends the progress lines.
func (w *walker) stop() {
	close(w.done)
	w.wg.Wait()
}

func (w *walker) progress() {
	t := time.NewTicker(walkProgressEvery)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
			w.mu.Lock()
			slog.Info("listing the source", "directories", w.dirs, "images", w.files, "at", w.at)
			w.mu.Unlock()
		}
	}
}

// list lists dir's image files recursively, sorted by path. An entry
// that cannot be listed (gone, unreadable, a path past PATH_MAX) or that
// the rules leave out is named in leftOut; it never fails the listing.
// Only ctx's end does.
func (w *walker) list(dir string) ([]string, error) {
	var files []string
	err := w.walk(dir, nil, &files)
	sort.Strings(files)
	return files, err
}

func (w *walker) walk(dir string, above []dirID, files *[]string) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	st, err := os.Stat(dir)
	if err != nil {
		noteLeftOut(w.leftOut, dir, err)
		return nil
	}
	id := idOf(st)
	switch {
	case slices.Contains(above, id):
		noteLeftOut(w.leftOut, dir, errors.New("a link back to a directory above it (a loop)"))
		return nil
	case w.above[id]:
		noteLeftOut(w.leftOut, dir, errors.New("a link to the source's directory or one above it (it would list the source again, or the whole machine)"))
		return nil
	}
	if kind := pseudoFS(dir, id.dev); kind != "" {
		noteLeftOut(w.leftOut, dir, fmt.Errorf("on %s, a pseudo file system: never listed", kind))
		return nil
	}
	w.mu.Lock()
	w.at, w.dirs = dir, w.dirs+1
	dirs, images := w.dirs, w.files
	w.mu.Unlock()
	w.opts.tell("listing the folder: %d directories, %d images so far, at %s", dirs, images, dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		noteLeftOut(w.leftOut, dir, err) // the entries read before the error are listed still
	}
	above = append(above, id)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		isDir := e.IsDir()
		if e.Type()&os.ModeSymlink != 0 {
			if st, err := os.Stat(p); err == nil {
				isDir = st.IsDir()
			} // a dangling link with an image's name is a sample that fails when read, as before
		}
		switch {
		case isDir:
			if err := w.walk(p, above, files); err != nil {
				return err
			}
		case imageExts[strings.ToLower(filepath.Ext(p))]:
			*files = append(*files, p)
			w.mu.Lock()
			w.files++
			w.mu.Unlock()
		}
	}
	return nil
}

// pseudoFS names the pseudo file system dir (of device dev) is on, ""
// for any other. devtmpfs says it is tmpfs: /dev, /proc and /sys are
// also told by their device where each is a file system of its own.
func pseudoFS(dir string, dev uint64) string {
	for _, p := range []string{"/dev", "/proc", "/sys"} {
		if d, ok := systemDevs()[p]; ok && d == dev {
			return p
		}
	}
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil {
		return ""
	}
	return pseudoFSTypes[int64(fs.Type)]
}

// systemDevs are the devices of /dev, /proc and /sys where each is
// mounted apart from "/".
var systemDevs = sync.OnceValue(func() map[string]uint64 {
	devs := map[string]uint64{}
	root, err := os.Stat("/")
	if err != nil {
		return devs
	}
	for _, p := range []string{"/dev", "/proc", "/sys"} {
		if st, err := os.Stat(p); err == nil && idOf(st).dev != idOf(root).dev {
			devs[p] = idOf(st).dev
		}
	}
	return devs
})

// pseudoFSTypes are the kernel's own file systems (statfs f_type).
var pseudoFSTypes = map[int64]string{
	unix.PROC_SUPER_MAGIC: "proc", unix.SYSFS_MAGIC: "sysfs", unix.DEVPTS_SUPER_MAGIC: "devpts",
	unix.CGROUP_SUPER_MAGIC: "cgroup", unix.CGROUP2_SUPER_MAGIC: "cgroup2", unix.DEBUGFS_MAGIC: "debugfs",
	unix.TRACEFS_MAGIC: "tracefs", unix.SECURITYFS_MAGIC: "securityfs", unix.BPF_FS_MAGIC: "bpf",
	unix.PSTOREFS_MAGIC: "pstore", unix.EFIVARFS_MAGIC: "efivarfs",
	0x65735543: "fusectl", 0x62656570: "configfs", 0x19800202: "mqueue", // no unix constants
}

// dirID is a directory's identity, whatever the path to it.
type dirID struct{ dev, ino uint64 }

func idOf(st os.FileInfo) dirID {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return dirID{uint64(sys.Dev), sys.Ino}
	}
	return dirID{}
}
