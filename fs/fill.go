package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// fillDirName is the hidden directory through which the filler opens
// batches: it is not listed, and only the daemon's filler may open what
// it holds.
const fillDirName = ".fill"

// fillDirIno is the hidden directory's inode number, below the batches'.
const fillDirIno = batchInoBase - 1

// filler fills the kernel's page cache with a batch as soon as a consumer
// has looked it up, when the daemon serves reads (no passthrough: a user
// without root). A reader's own reads come one readahead window at a time,
// each copied by one daemon thread while the reader waits (1.1-1.7 GB/s);
// the filler opens the batch's inode itself and asks for all of it at
// once, so that the daemon's threads copy its windows in parallel while
// the reader's first pages are already there. The page cache is the
// inode's, shared by every consumer of the batch (keep-cache), and goes
// when the kernel forgets the inode (the forgetter, once the store has
// freed the batch) or under memory pressure, as any file cache.
//
// The kernel learns a batch's inode only from a lookup, and caps a
// read-ahead request at its readahead window: so the filler opens the
// batch through its own mount (MOUNTPOINT/.fill/SEQ, the same inode as
// the consumer's name) and asks for each window in turn (posix_fadvise
// WILLNEED returns once the window's reads are queued). Its opens hold
// the batch (Store.Hold) and consume nothing. Its goroutine is
// Mounted.Unmount's to stop, before the unmount: an open file would make
// the unmount busy. (An outside `fusermount3 -u` while consumers read
// can still meet one of its opens, which last milliseconds, and fail
// EBUSY: run it again.)
type filler struct {
	dir    string // the mountpoint
	window int64  // the kernel's readahead window, bytes
	tid    atomic.Int64
	queue  chan *batchFile
	mu     sync.Mutex
	wanted map[uint64]*batchFile // batches queued or being filled, by sequence number
	filled atomic.Uint64         // batches whose reads were all queued
	failed atomic.Uint64         // batches the filler could not read ahead (freed ones aside)
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func newFiller(dir string, window int64) *filler {
	f := &filler{dir: dir, window: window, queue: make(chan *batchFile, 256), wanted: map[uint64]*batchFile{},
		stop: make(chan struct{}), done: make(chan struct{})}
	started := make(chan struct{})
	go f.run(started)
	<-started
	return f
}

// want queues b to be filled; it never blocks (it runs in a lookup). A
// full queue drops b: its reader then reads it window by window.
func (f *filler) want(b *batchFile) {
	if f == nil {
		return
	}
	f.mu.Lock()
	if _, ok := f.wanted[b.seq]; ok {
		f.mu.Unlock()
		return
	}
	f.wanted[b.seq] = b
	f.mu.Unlock()
	select {
	case f.queue <- b:
	default:
		f.forget(b.seq)
	}
}

func (f *filler) forget(seq uint64) {
	f.mu.Lock()
	delete(f.wanted, seq)
	f.mu.Unlock()
}

// node is the batch queued under seq, if any: what .fill/SEQ names.
func (f *filler) node(seq uint64) *batchFile {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wanted[seq]
}

// isFiller says whether a request comes from the filler's thread.
func (f *filler) isFiller(ctx context.Context) bool {
	if f == nil {
		return false
	}
	c, ok := fuse.FromContext(ctx)
	return ok && int64(c.Pid) == f.tid.Load()
}

func (f *filler) run(started chan<- struct{}) {
	defer close(f.done)
	// A thread of its own, so that the file system knows the filler's
	// requests by the thread that makes them. One is enough: eight, each
	// filling a part of a batch, read no faster on 16 cores and cost the
	// daemon 1.6 s of CPU a GB read instead of 1.0.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f.tid.Store(int64(unix.Gettid()))
	close(started)
	for {
		select {
		case <-f.stop:
			return
		case b := <-f.queue:
			switch err := f.fill(b); {
			case err == nil:
				f.filled.Add(1)
			case errors.Is(err, unix.ENOENT): // consumed and freed before the filler got to it
			default:
				f.failed.Add(1)
				slog.Debug("read-ahead of a batch", "err", err)
			}
			f.forget(b.seq)
		}
	}
}

// fill queues reads of all of b, a window at a time.
func (f *filler) fill(b *batchFile) error {
	path := filepath.Join(f.dir, fillDirName, strconv.FormatUint(b.seq, 10))
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil { // ENOENT: freed already
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	for off := int64(0); off < b.size; off += f.window {
		if err := unix.Fadvise(fd, off, f.window, unix.FADV_WILLNEED); err != nil {
			return fmt.Errorf("read ahead %s at %d: %w", path, off, err)
		}
	}
	return nil
}

// close stops the goroutine and waits for it.
// counts are the batches read ahead whole, and those that could not be;
// none with passthrough (no filler).
func (f *filler) counts() (filled, failed uint64) {
	if f == nil {
		return 0, 0
	}
	return f.filled.Load(), f.failed.Load()
}

func (f *filler) close() {
	if f == nil {
		return
	}
	f.once.Do(func() { close(f.stop) })
	<-f.done
}

// fillDir is MOUNTPOINT/.fill: each batch the filler has queued, under its
// sequence number; nothing else, and only for the mount's owner.
type fillDir struct {
	readOnlyDir
	fs *fileSystem
}

var (
	_ = (fusefs.NodeLookuper)((*fillDir)(nil))
	_ = (fusefs.NodeGetattrer)((*fillDir)(nil))
	_ = (fusefs.NodeReaddirer)((*fillDir)(nil))
)

// Readdir lists nothing: what the filler looked up is its own.
func (d *fillDir) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	return fusefs.NewListDirStream(nil), 0
}

func (d *fillDir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o500
	out.Uid, out.Gid = mountOwner()
	return 0
}

func (d *fillDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	seq, err := strconv.ParseUint(name, 10, 64)
	if err != nil || !d.fs.fill.isFiller(ctx) {
		return nil, syscall.ENOENT
	}
	b := d.fs.fill.node(seq)
	if b == nil {
		return nil, syscall.ENOENT
	}
	node := d.fs.newBatchFile(b.seq, b.size, b.at)
	node.fillAttr(&out.Attr)
	// The inode number of the consumer's name: go-fuse answers with that
	// inode, the kernel's one inode of the batch, if it still knows it.
	return d.NewInode(ctx, node, fusefs.StableAttr{Mode: syscall.S_IFREG, Ino: batchIno(seq)}), 0
}
