package fs

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tsock/tsock/batchstore"
)

// batchInoBase keeps batch inode numbers clear of go-fuse's automatic ones
// (from 2^63) and of small numbers.
const batchInoBase = 1 << 32

func batchIno(seq uint64) uint64 { return batchInoBase + seq }

// batchFile is one published batch; the same inode appears in every
// consumer directory that lists it.
type batchFile struct {
	readOnlyFile
	fs   *fileSystem
	seq  uint64
	size int64
	at   time.Time
	// direct is the batch's file as its user's other processes may open
	// it, "/proc/PID/fd/N INODE", once an open without passthrough
	// learned it (DirectXattr).
	direct atomic.Pointer[string]
}

// DirectXattr names the extended attribute of a batch file that says
// where its bytes lie, around FUSE: "/proc/PID/fd/N INODE", the
// daemon's descriptor of the batch's memory-backed file and that file's
// inode number. A reader of the daemon's user that holds the batch open
// in the mount (its lease) may open that path and read or map the bytes
// there at memory speed; the inode says it opened the right file. Absent
// (ENODATA) where passthrough serves reads (root) or the file has no
// descriptor (a re-batched file, a GPU slab).
const DirectXattr = "user.tsock.direct"

// newBatchFile is the node of producer batch seq, as any directory shows
// it.
func (fsys *fileSystem) newBatchFile(seq uint64, size int64, at time.Time) *batchFile {
	b := &batchFile{fs: fsys, seq: seq, size: size, at: at}
	b.readOnlyFile.batch, b.readOnlyFile.seq = true, seq
	return b
}

var (
	_ = (fusefs.NodeOpener)((*batchFile)(nil))
	_ = (fusefs.NodeGetattrer)((*batchFile)(nil))
	_ = (fusefs.NodeGetxattrer)((*batchFile)(nil))
)

func (b *batchFile) fillAttr(attr *fuse.Attr) { fillFileAttr(attr, b.size, b.at) }

// fillFileAttr gives a read-only file of size bytes, made at t (now if
// unknown), its attributes.
func fillFileAttr(attr *fuse.Attr, size int64, t time.Time) {
	attr.Mode = syscall.S_IFREG | 0o444
	attr.Size = uint64(size)
	attr.Blocks = (attr.Size + 511) / 512
	attr.Nlink = 1
	if t.IsZero() {
		t = time.Now()
	}
	attr.SetTimes(&t, &t, &t)
}

func (b *batchFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	b.fillAttr(&out.Attr)
	return 0
}

// Open takes a lease for the consumer the caller looked the batch up as.
func (b *batchFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&writeFlags != 0 {
		return nil, 0, syscall.EROFS
	}
	if b.fs.fill.isFiller(ctx) {
		return b.openToFill()
	}
	lease, err := b.fs.store.Open(b.seq, callerID(ctx))
	if err != nil {
		return nil, 0, errno(err)
	}
	h := b.handle(lease)
	if b.fs.path.passthrough() {
		return &passthroughHandle{h}, fuse.FOPEN_KEEP_CACHE, 0
	}
	if b.direct.Load() == nil {
		b.learnDirect(lease.Blob())
	}
	return h, fuse.FOPEN_KEEP_CACHE, 0
}

// learnDirect notes where blob's bytes lie for DirectXattr, if they lie
// in a file of the daemon's.
func (b *batchFile) learnDirect(blob batchstore.Blob) {
	fd := blob.Fd()
	if fd < 0 {
		return
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return
	}
	where := fmt.Sprintf("/proc/%d/fd/%d %d", os.Getpid(), fd, st.Ino)
	b.direct.Store(&where)
}

// Getxattr answers DirectXattr; every other attribute is absent.
func (b *batchFile) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	where := b.direct.Load()
	if attr != DirectXattr || where == nil {
		return 0, syscall.ENODATA
	}
	if len(dest) < len(*where) {
		return uint32(len(*where)), syscall.ERANGE
	}
	b.fs.path.directAsked.Add(1)
	return uint32(copy(dest, *where)), 0
}

// openToFill opens the batch for the filler: a lease no consumer is
// charged with, nothing consumed at its release, and the page cache kept
// (what the filler is there to fill).
func (b *batchFile) openToFill() (fusefs.FileHandle, uint32, syscall.Errno) {
	lease, err := b.fs.store.Hold(b.seq)
	if err != nil {
		b.fs.forget.add(&b.readOnlyFile) // freed since the filler's lookup
		return nil, 0, errno(err)
	}
	// Forgotten as a consumer's is: once the batch is freed.
	return b.handle(lease), fuse.FOPEN_KEEP_CACHE, 0
}

// handle serves reads of the batch from its blob.
func (b *batchFile) handle(lease *batchstore.Lease) *batchHandle {
	return &batchHandle{lease: lease, path: b.fs.path, data: lease.Blob(), shared: true, served: &b.fs.path.daemonBytes,
		forget: b.fs.forget, node: &b.readOnlyFile}
}

// BatchData is what a handle reads from: a producer batch's blob, or a
// consumer's re-batched composite of several.
type BatchData interface {
	Size() int64
	ReadAt(p []byte, off int64) (int, error)
}

// batchHandle serves reads from the daemon; the lease keeps the blobs alive.
type batchHandle struct {
	lease  *batchstore.Lease
	path   *dataPath
	data   BatchData
	shared bool           // a producer batch: a read here means passthrough is off
	served *atomic.Uint64 // counts the bytes served, if set
	forget *forgetter     // told of the release
	node   *readOnlyFile  // the file's node, to forget once released
}

var (
	_ = (fusefs.FileReader)((*batchHandle)(nil))
	_ = (fusefs.FileReleaser)((*batchHandle)(nil))
)

func (h *batchHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.shared {
		h.path.daemonReads.Add(1)
	}
	if off >= h.data.Size() {
		return bytesReply(nil), 0
	}
	size := min(int64(len(dest)), h.data.Size()-off)
	// A producer batch's reply is spliced from its blob's file: the kernel
	// copies the file's pages into the reply once, the daemon not at all
	// (a pread and a write copy each byte twice: 18-25% more of the
	// daemon's CPU a GB read).
	if fd := h.spliceFd(); fd >= 0 && size <= h.path.spliceMax && !h.path.spliceOff.Load() {
		h.served.Add(uint64(size))
		return &splicedReply{fd: uintptr(fd), off: off, size: int(size), path: h.path}, 0
	}
	n, err := h.data.ReadAt(dest[:size], off)
	if err != nil {
		return nil, syscall.EIO
	}
	if h.served != nil {
		h.served.Add(uint64(n))
	}
	return bytesReply(dest[:n]), 0
}

// spliceFd is the file a reply may be spliced from: a producer batch's
// blob's, if it has one; -1 otherwise.
func (h *batchHandle) spliceFd() int {
	if !h.shared {
		return -1
	}
	return h.lease.Blob().Fd()
}

// Release comes after the last close and munmap of this open.
func (h *batchHandle) Release(ctx context.Context) syscall.Errno {
	h.lease.Release()
	h.forget.add(h.node)
	return 0
}

// passthroughHandle lets the kernel read the blob's file itself. If the
// kernel refuses, go-fuse falls back to Read, which counts daemonReads.
type passthroughHandle struct {
	*batchHandle
}

var _ = (fusefs.FilePassthroughFder)((*passthroughHandle)(nil))

func (h *passthroughHandle) PassthroughFd() (int, bool) {
	return h.lease.Blob().Fd(), true
}
