package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// imageExts are the extensions torchvision's ImageFolder accepts.
var imageExts = map[string]bool{
	".jpg": true, ".jpeg": true, ".png": true, ".ppm": true, ".bmp": true,
	".pgm": true, ".tif": true, ".tiff": true, ".webp": true, ".gif": true,
}

// Folder is a directory in torchvision ImageFolder form: one sub-directory
// per class, classes sorted by name get labels 0..C-1, files sorted by
// name within a class; a sample's index is its position in that order.
// Rescan appends what appeared since; nothing ever moves.
type Folder struct {
	root   string
	prefix string                     // root and a separator: what every path starts with
	list   atomic.Pointer[folderList] // replaced whole by Rescan: readers never lock
	mu     sync.Mutex                 // one Rescan at a time
}

// folderList is what a scan found; never changed once published.
type folderList struct {
	classes []string
	paths   names // relative to the root (Folder.prefix)
	labels  []int32
	leftOut []string // entries the scan could not list, "path: why" (at most maxLeftOut, then a count)
	removed []int    // samples whose files this scan no longer found, in index order
}

// maxLeftOut bounds the entries a scan names: a tree of a million
// unreadable files must not take the daemon's memory.
const maxLeftOut = 100

// scanFolder lists root until ctx ends (a signal to the mount), telling
// opts.Progress how far it got. It fails when root is missing, not a
// directory, or holds no image files in class sub-directories.
func scanFolder(ctx context.Context, root string, opts Options) (*Folder, error) {
	prefix := filepath.Clean(root)
	if !strings.HasSuffix(prefix, string(filepath.Separator)) { // "/" has one
		prefix += string(filepath.Separator)
	}
	f := &Folder{root: root, prefix: prefix}
	l, _, err := f.scan(ctx, &folderList{}, opts)
	if err != nil {
		return nil, err
	}
	if l.paths.len() == 0 {
		return nil, fmt.Errorf("source %s: no image files (%s) in class sub-directories", root, extList())
	}
	f.list.Store(l)
	return f, nil
}

// Rescan lists the folder again and appends what is new: files of known
// classes, then new classes (labels after the known ones, in name
// order), each in name order. Known samples keep their indices and
// labels; a file that vanished keeps its index (the producer leaves it
// out of later epochs: removed, not skipped). It returns how many
// samples it added.
func (f *Folder) Rescan(ctx context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.list.Load()
	l, added, err := f.scan(ctx, old, Options{})
	if err != nil {
		return 0, err
	}
	f.list.Store(l)
	return added, nil
}

// Removed implements Rescanner: the samples whose files the last listing
// did not find. One that comes back (the same path) is found again.
func (f *Folder) Removed() []int { return f.list.Load().removed }

// scan lists root against what was found before (old), returning the
// list with the new samples appended.
func (f *Folder) scan(ctx context.Context, old *folderList, opts Options) (*folderList, int, error) {
	entries, err := os.ReadDir(f.root)
	if err != nil {
		return nil, 0, fmt.Errorf("source %s: %w", f.root, err)
	}
	known := make(map[string]int, old.paths.len())
	for i := range old.paths.len() {
		known[old.paths.at("", i)] = i
	}
	found := make([]bool, old.paths.len())
	labels := make(map[string]int32, len(old.classes))
	for i, c := range old.classes {
		labels[c] = int32(i)
	}
	l := &folderList{classes: slices.Clip(old.classes), paths: old.paths.clip(), labels: slices.Clip(old.labels)}
	w, err := newWalker(ctx, f.root, opts, &l.leftOut)
	if err != nil {
		return nil, 0, err
	}
	defer w.stop()
	var newClasses []string
	byClass := map[string]*names{}
	for _, e := range entries { // ReadDir sorts by name
		if !isDir(f.root, e) || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		files, err := w.list(filepath.Join(f.root, e.Name()))
		if err != nil {
			return nil, 0, fmt.Errorf("source %s: listing stopped: %w", f.root, err)
		}
		fresh := &names{}
		for _, p := range files {
			rel := strings.TrimPrefix(p, f.prefix)
			if i, ok := known[rel]; ok {
				found[i] = true
			} else {
				fresh.add(rel)
			}
		}
		byClass[e.Name()] = fresh
		if _, ok := labels[e.Name()]; !ok && fresh.len() > 0 {
			newClasses = append(newClasses, e.Name()) // torchvision skips empty classes too
		}
	}
	added := 0
	add := func(class string) {
		found := byClass[class]
		if found == nil {
			return
		}
		l.paths.addAll(*found)
		for range found.len() {
			l.labels = append(l.labels, labels[class])
		}
		added += found.len()
	}
	for _, c := range old.classes {
		add(c)
	}
	for _, c := range newClasses {
		labels[c] = int32(len(l.classes))
		l.classes = append(l.classes, c)
		add(c)
	}
	for i, ok := range found {
		if !ok {
			l.removed = append(l.removed, i)
		}
	}
	return l, added, nil
}

// isDir follows symlinks, as ImageFolder does.
func isDir(root string, e os.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	st, err := os.Stat(filepath.Join(root, e.Name()))
	return err == nil && st.IsDir()
}

// noteLeftOut names an entry a scan left out, up to maxLeftOut, then
// counts the rest in the last line.
func noteLeftOut(leftOut *[]string, path string, err error) {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is said once
	}
	switch n := len(*leftOut); {
	case n < maxLeftOut:
		*leftOut = append(*leftOut, fmt.Sprintf("%s: %v", path, err))
	case n == maxLeftOut:
		*leftOut = append(*leftOut, "and more")
	}
}

// Skipped implements Skipper: the entries the last scan could not list.
func (f *Folder) Skipped() []string { return f.list.Load().leftOut }

// LeftOut implements Skipper: none. What a scan could not list is a
// directory (unreadable, a loop), not a sample it could count; an image
// file that cannot be read is listed, and skipped when it is read.
func (f *Folder) LeftOut() int { return 0 }

func extList() string {
	exts := make([]string, 0, len(imageExts))
	for e := range imageExts {
		exts = append(exts, e)
	}
	sort.Strings(exts)
	return strings.Join(exts, " ")
}

// Describe implements Source.
func (f *Folder) Describe() string { return f.root }

// Len implements Source.
func (f *Folder) Len() int { return f.list.Load().paths.len() }

// Classes implements Source.
func (f *Folder) Classes() []string { return f.list.Load().classes }

// Label implements Source.
func (f *Folder) Label(i int) int { return int(f.list.Load().labels[i]) }

// Name implements Source.
func (f *Folder) Name(i int) string { return f.list.Load().paths.at(f.prefix, i) }

// Version implements Versioned: the file's inode, size and mtime.
func (f *Folder) Version(i int) (string, error) {
	st, err := os.Stat(f.Name(i))
	if err != nil {
		return "", err
	}
	var ino uint64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ino = sys.Ino
	}
	return fmt.Sprintf("%d:%d:%d", ino, st.Size(), st.ModTime().UnixNano()), nil
}

// Encoded implements Source.
func (f *Folder) Encoded(_ context.Context, i int, scratch *[]byte) ([]byte, error) {
	return readFile(f.Name(i), scratch)
}

// maxFileSize bounds one encoded image read into memory.
const maxFileSize = 256 << 20

// readFile reads a regular file into *buf, growing it as needed. It uses
// the system calls directly: an os.File per image would be garbage.
func readFile(path string, buf *[]byte) ([]byte, error) {
	// The daemon runs as root over folders anyone may have written: open
	// nothing but regular files (a device's open can act), and nothing
	// that can block (a FIFO's open waits for a writer forever; one that
	// appears after the stat opens at once with O_NONBLOCK, then fails
	// the fstat below).
	var pre unix.Stat_t
	if err := unix.Stat(path, &pre); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if pre.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("not a regular file (mode %#o)", pre.Mode&unix.S_IFMT)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("not a regular file (mode %#o)", st.Mode&unix.S_IFMT)
	}
	if st.Size > maxFileSize {
		return nil, fmt.Errorf("file of %d bytes is over the %d-byte limit", st.Size, maxFileSize)
	}
	// One byte more than the size, so that a file that grew is still read
	// whole up to that point, and the loop meets EOF.
	n := int(st.Size)
	if cap(*buf) < n+1 {
		*buf = make([]byte, n+1)
	}
	b := (*buf)[:n+1]
	got := 0
	for got < len(b) {
		k, err := unix.Read(fd, b[got:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if k == 0 {
			break
		}
		got += k
	}
	return b[:got], nil
}
