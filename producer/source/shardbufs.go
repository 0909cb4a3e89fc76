package source

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"
)

// shardBufs maps the buffers pieces are read into: in memory up to the
// shard memory, then in unnamed files (O_TMPFILE) on the shard disk up to
// its size. A dropped piece's memory buffer is kept for the next read: a
// new buffer per read would let the heap grow to twice the budget between
// collections (1.3 GiB of RSS for a 512 MiB budget, measured over 1,282
// shards), where reuse keeps it at the budget. A reused buffer may be
// larger than the piece it holds, so the memory limit is the shard memory
// and one piece more (memLimit), a piece of at most a quarter of the
// memory: a larger one (held where the shard disk makes the budget
// larger) goes to the disk, never into memory past the shard memory's
// quarter (a Parquet footer's claim once sized that slack: 1 GiB). A disk buffer is a file of its piece's
// size, unmapped (and gone) when its piece is dropped: the disk holds
// exactly what it is said to. The buffers are mapped
// outside Go's heap: in it, their half a gigabyte would set the
// collector's target to twice that, and the garbage every sample makes
// would fill it (1.1 GiB measured with reuse alone).
//
// What is mapped never passes the limits: a buffer that would is not
// made (get fails, and the sample is read alone). A disk buffer's blocks
// are allocated when it is made (fallocate), so that a full disk refuses
// it there rather than failing a write into the mapping later (SIGBUS).
// The kernel writes a disk buffer's pages out under memory pressure and
// reads them back on use: the memory a disk buffer takes is the page
// cache's, given back when memory is short.
type shardBufs struct {
	mu        sync.Mutex
	free      [][]byte
	onDisk    map[*byte]bool // the disk's buffers
	mem, disk int64          // mapped now, free or not
	memLimit  int64
	diskLimit int64
	dir       string
	closed    bool  // put unmaps: nothing is read again
	diskPeak  int64 // the most ever mapped on disk, for tests
}

// errNoRoom is get's failure: the sample is read alone.
var errNoRoom = errors.New("no room for another piece")

// get is a buffer of n bytes: a free one in memory, else a new one where
// the limits allow (unmapping free ones to make room).
func (p *shardBufs) get(n int64) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := -1
	for k, b := range p.free {
		if int64(cap(b)) >= n && (best < 0 || cap(b) < cap(p.free[best])) {
			best = k
		}
	}
	if best >= 0 {
		b := p.free[best]
		p.free[best] = p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		return b[:n], nil
	}
	for _, disk := range []bool{false, true} {
		for p.used(disk)+n > p.limit(disk) && p.unmapFree(disk) {
		}
		if p.used(disk)+n > p.limit(disk) {
			continue
		}
		b, err := p.mapBuf(n, disk)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, errNoRoom
}

func (p *shardBufs) used(disk bool) int64 {
	if disk {
		return p.disk
	}
	return p.mem
}

func (p *shardBufs) limit(disk bool) int64 {
	if disk {
		return p.diskLimit
	}
	return p.memLimit
}

// unmapFree unmaps one free buffer of the kind; false if there is none.
// Callers hold mu.
func (p *shardBufs) unmapFree(disk bool) bool {
	for k, b := range p.free {
		if p.onDisk[unsafe.SliceData(b)] == disk {
			p.free[k] = p.free[len(p.free)-1]
			p.free = p.free[:len(p.free)-1]
			p.unmap(b)
			return true
		}
	}
	return false
}

// mapBuf maps a new buffer of n bytes. Callers hold mu.
func (p *shardBufs) mapBuf(n int64, disk bool) ([]byte, error) {
	if !disk {
		b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil, fmt.Errorf("a piece's buffer of %d bytes: %w", n, err)
		}
		p.mem += n
		return b, nil
	}
	fd, err := unix.Open(p.dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("shard disk %s: %w", p.dir, err)
	}
	defer unix.Close(fd) // the mapping keeps the file; unmapped, it is gone
	if err := unix.Fallocate(fd, 0, 0, n); err != nil {
		return nil, fmt.Errorf("shard disk %s: %s for a piece: %w", p.dir, humanize.IBytes(uint64(n)), err)
	}
	b, err := unix.Mmap(fd, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shard disk %s: mapping a piece: %w", p.dir, err)
	}
	if p.onDisk == nil {
		p.onDisk = map[*byte]bool{}
	}
	p.onDisk[unsafe.SliceData(b)] = true
	p.disk += n
	p.diskPeak = max(p.diskPeak, p.disk)
	return b, nil
}

// unmap gives a buffer back to the system (its disk file with it).
// Callers hold mu.
func (p *shardBufs) unmap(b []byte) {
	b = b[:cap(b)]
	if p.onDisk[unsafe.SliceData(b)] {
		delete(p.onDisk, unsafe.SliceData(b))
		p.disk -= int64(len(b))
	} else {
		p.mem -= int64(len(b))
	}
	unix.Munmap(b)
}

// put keeps b for a later get.
func (p *shardBufs) put(b []byte) {
	if b == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.onDisk[unsafe.SliceData(b)] {
		p.unmap(b)
		return
	}
	p.free = append(p.free, b[:cap(b)])
}

// close unmaps every free buffer: after the last epoch nothing is read
// again.
func (p *shardBufs) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.free {
		p.unmap(b)
	}
	p.free, p.closed = nil, true
}

// Mapped is the bytes mapped in memory and on disk now.
func (p *shardBufs) Mapped() (mem, disk int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mem, p.disk
}

// The file systems whose files are memory: a shard disk there would be
// more shard memory, uncounted.
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

// diskRoom is the shard disk space allows: for AutoDisk, half the free
// space of a directory on a disk (0 where there is none to use); for a
// size named, that size, or an error saying why the directory cannot
// hold it.
func diskRoom(space ShardSpace) (int64, error) {
	if space.Disk == 0 || space.DiskDir == "" {
		return 0, nil
	}
	free, err := statFree(space.DiskDir)
	switch {
	case space.Disk == AutoDisk && err != nil:
		return 0, nil
	case space.Disk == AutoDisk:
		return free / 2, nil
	case err != nil:
		return 0, err
	case free < space.Disk:
		return 0, fmt.Errorf("shard disk %s: %s free, the shard disk may take %s", space.DiskDir, humanize.IBytes(uint64(free)), humanize.IBytes(uint64(space.Disk)))
	}
	return space.Disk, nil
}

// statFree is diskFree; tests size a disk larger than the machine's.
var statFree = diskFree

// diskFree is dir's free space, where unnamed files can be made in it
// and it is not memory.
func diskFree(dir string) (int64, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return 0, fmt.Errorf("shard disk %s: %w", dir, err)
	}
	if fs.Type == tmpfsMagic || fs.Type == ramfsMagic {
		return 0, fmt.Errorf("shard disk %s: a file system in memory (tmpfs): hold pieces in memory with --shard-memory instead", dir)
	}
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("shard disk %s: an unnamed file (O_TMPFILE): %w", dir, err)
	}
	unix.Close(fd)
	return int64(fs.Bavail) * fs.Bsize, nil
}
