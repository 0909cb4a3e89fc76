package memfile

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Kind names a backing.
type Kind string

// The backings.
const (
	MemFD Kind = "memfd"
	Tmpfs Kind = "tmpfs"
)

// Allocator creates files of one backing.
type Allocator struct {
	kind  Kind
	dirFd int // tmpfs only: the detached tmpfs's root, -1 once closed
	// userns: the tmpfs is a user namespace's (NewUserTmpfs), not root's.
	userns bool

	// mu makes a file's free (close included) and Lingering's count of
	// the files not yet freed exclusive, so that a file is counted
	// either as live or as lingering, never both or neither.
	mu   sync.Mutex
	live map[*File]struct{} // files not yet freed
}

// NewMemFD returns an allocator of anonymous memfds.
func NewMemFD() *Allocator { return newAllocator(MemFD, -1) }

func newAllocator(kind Kind, dirFd int) *Allocator {
	return &Allocator{kind: kind, dirFd: dirFd, live: map[*File]struct{}{}}
}

// NewTmpfs mounts a private tmpfs and allocates files there: files
// written through their mapping (Create) get huge pages, files written by
// write(2) (CreateEmpty) 4 KiB pages. It needs CAP_SYS_ADMIN. The tmpfs is detached from every path
// at once and lives on through a descriptor of its root: it is nobody
// else's to see, and it vanishes with the process, even a SIGKILLed one,
// leaving no stale mount behind.
func NewTmpfs(parent string) (*Allocator, error) {
	dir, err := os.MkdirTemp(parent, "tsock-batches-")
	if err != nil {
		return nil, fmt.Errorf("tmpfs backing: %w", err)
	}
	defer os.Remove(dir)
	// huge=advise with MADV_HUGEPAGE on Create's mappings: huge pages where
	// the daemon writes a batch once and the kernel reads it many times;
	// 4 KiB pages for ingested files. Where the hypervisor takes back every
	// freed huge page (free page reporting, as on the Firecracker VMs tsock
	// is tested on), each new huge page costs a host fault per 4 KiB, and
	// an outside producer's write(2) ran at 0.2-0.8x of /dev/shm's speed;
	// on 4 KiB pages it matches /dev/shm.
	fd, err := mountDetached(dir)
	if err != nil {
		return nil, err
	}
	return newAllocator(Tmpfs, fd), nil
}

// huge is the tmpfs's huge= option, root's and a user namespace's.
const huge = "advise"

// mountDetached mounts the private tmpfs on dir, opens its root and
// detaches it from dir: the descriptor is then the only way to it.
func mountDetached(dir string) (int, error) {
	if err := unix.Mount("tsock", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,huge="+huge); err != nil {
		return -1, fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if uerr := unix.Unmount(dir, unix.MNT_DETACH); uerr != nil && err == nil {
		unix.Close(fd)
		err = fmt.Errorf("detach: %w", uerr)
	}
	if err != nil {
		return -1, fmt.Errorf("tmpfs on %s: %w", dir, err)
	}
	return fd, nil
}

// Kind is the backing in use.
func (a *Allocator) Kind() Kind { return a.kind }

// Describe names the backing for status files.
func (a *Allocator) Describe() string {
	if a.kind == Tmpfs && a.userns {
		return fmt.Sprintf("tmpfs huge=%s in a user namespace", huge)
	}
	if a.kind == Tmpfs {
		return fmt.Sprintf("tmpfs huge=%s", huge)
	}
	return string(a.kind)
}

// Create returns a new file of size bytes, mapped writable.
func (a *Allocator) Create(size int64) (*File, error) {
	if size <= 0 {
		return nil, fmt.Errorf("create %d-byte file: size must be positive", size)
	}
	fd, err := a.open()
	if err != nil {
		return nil, err
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("size %s file to %d: %w", a.kind, size, err)
	}
	data, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("map %d-byte %s file: %w", size, a.kind, err)
	}
	if a.kind == Tmpfs {
		// Best effort: without huge pages the file is only slower to read.
		_ = unix.Madvise(data, unix.MADV_HUGEPAGE)
	}
	return a.track(&File{fd: fd, data: data, size: size}), nil
}

// CreateEmpty returns a new empty file that someone else will write
// through its descriptor (an ingested batch). It is not mapped; Stat
// learns its size once it is written.
func (a *Allocator) CreateEmpty() (*File, error) {
	fd, err := a.open()
	if err != nil {
		return nil, err
	}
	return a.track(&File{fd: fd}), nil
}

func (a *Allocator) track(f *File) *File {
	f.alloc = a
	a.mu.Lock()
	defer a.mu.Unlock()
	a.live[f] = struct{}{}
	return f
}

// Lingering is the memory that files already freed still hold: a
// reader's mapping keeps a file's pages after every descriptor is
// closed (with FUSE passthrough the mapping is of the file itself). It is
// what the private tmpfs holds beyond the files not yet freed, to the
// page. A memfd's pages are counted with every other memfd on the
// machine, so there it is -1: unknown.
func (a *Allocator) Lingering() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.kind != Tmpfs || a.dirFd < 0 {
		return -1
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(a.dirFd, &fs); err != nil {
		return -1
	}
	held := int64(fs.Blocks-fs.Bfree) * fs.Bsize
	for f := range a.live {
		var st unix.Stat_t
		if err := unix.Fstat(f.fd, &st); err == nil {
			held -= st.Blocks * 512
		}
	}
	return max(held, 0)
}

// open makes a new file of the allocator's backing, read-write: the
// kernel reuses the first passthrough fd of an inode for every later
// open of it, readers' included.
func (a *Allocator) open() (int, error) {
	var fd int
	var err error
	if a.kind == Tmpfs {
		fd, err = unix.Openat(a.dirFd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	} else {
		fd, err = unix.MemfdCreate("tsock-batch", unix.MFD_CLOEXEC)
	}
	if err != nil {
		return -1, fmt.Errorf("create %s file: %w", a.kind, err)
	}
	return fd, nil
}

// Close lets the tmpfs go, if any: it is freed once the files still
// open are closed.
func (a *Allocator) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dirFd < 0 {
		return nil
	}
	fd := a.dirFd
	a.dirFd = -1
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("close tmpfs root: %w", err)
	}
	return nil
}

// File is one batch file. Write through Bytes, then Seal; after that it is
// read-only and safe for concurrent ReadAt.
type File struct {
	alloc *Allocator
	fd    int
	size  int64
	mu    sync.RWMutex
	data  []byte // writable mapping until Seal
	free  bool
}

// Bytes is the writable mapping of the whole file.
func (f *File) Bytes() []byte { return f.data }

// Size is the file's length.
func (f *File) Size() int64 { return f.size }

// Fd is the file's descriptor, for passthrough.
func (f *File) Fd() int { return f.fd }

// Stat learns the file's size from the kernel (after outside writes).
func (f *File) Stat() (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(f.fd, &st); err != nil {
		return 0, fmt.Errorf("stat batch file: %w", err)
	}
	f.size = st.Size
	return st.Size, nil
}

// SetSize sets the file's length, growing or cutting it (an ingested
// batch being written or laid out again).
func (f *File) SetSize(n int64) error {
	if n < 0 {
		return fmt.Errorf("size batch file to %d: negative", n)
	}
	if err := unix.Ftruncate(f.fd, n); err != nil {
		return fmt.Errorf("size batch file to %d: %w", n, err)
	}
	f.size = n
	return nil
}

// WriteAt writes into the file, for daemon-served writes.
func (f *File) WriteAt(p []byte, off int64) (int, error) {
	n, err := unix.Pwrite(f.fd, p, off)
	if err != nil {
		return n, fmt.Errorf("write batch file at %d: %w", off, err)
	}
	return n, nil
}

// MapRead maps the whole file read-only, for a copy (to a GPU); unmap
// ends the mapping.
func (f *File) MapRead() (data []byte, unmap func(), err error) {
	data, err = unix.Mmap(f.fd, 0, int(f.size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("map %d-byte batch file: %w", f.size, err)
	}
	return data, func() { unix.Munmap(data) }, nil
}

// MoveData moves the n bytes at from to to (a header that grew), growing
// the file to hold them.
func (f *File) MoveData(from, to, n int64) error {
	if to+n > f.size {
		if err := f.SetSize(to + n); err != nil {
			return err
		}
	}
	data, err := unix.Mmap(f.fd, 0, int(f.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map %d-byte batch file: %w", f.size, err)
	}
	copy(data[to:to+n], data[from:from+n])
	return unix.Munmap(data)
}

// Truncate shortens the file to n bytes (a batch that came out short).
func (f *File) Truncate(n int64) error {
	if n > f.size || n <= 0 {
		return fmt.Errorf("truncate %d-byte file to %d: out of range", f.size, n)
	}
	if err := unix.Ftruncate(f.fd, n); err != nil {
		return fmt.Errorf("truncate to %d: %w", n, err)
	}
	f.size = n
	f.data = f.data[:n]
	return nil
}

// Seal drops the writable mapping: the bytes are final.
func (f *File) Seal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.data == nil {
		return nil
	}
	err := unix.Munmap(f.data[:cap(f.data)])
	f.data = nil
	if err != nil {
		return fmt.Errorf("unmap batch file: %w", err)
	}
	return nil
}

// ReadAt reads from the file, for daemon-served reads.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.free { // the fd number may already name another file
		return 0, fmt.Errorf("read batch file at %d: already freed", off)
	}
	n, err := unix.Pread(f.fd, p, off)
	if err != nil {
		return n, fmt.Errorf("read batch file at %d: %w", off, err)
	}
	return n, nil
}

// Free unmaps and closes the file; its memory goes when the kernel's
// last reference (a passthrough reader's open file) goes.
func (f *File) Free() error {
	if err := f.Seal(); err != nil {
		return err
	}
	a := f.alloc
	a.mu.Lock()
	defer a.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.free {
		return fmt.Errorf("batch file freed twice")
	}
	f.free = true
	delete(a.live, f)
	return unix.Close(f.fd)
}
