package fs

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Ingest is the store's outside-producer side (--ingest): the format
// and the order are its business.
type Ingest interface {
	// Create starts batch seq, waiting for room in the buffer.
	Create(ctx context.Context, seq uint64) (IngestWriter, error)
	// Next renders ingest/next.
	Next() uint64
	// Order renders ingest/order, waiting until samples are needed.
	Order(ctx context.Context) ([]byte, error)
	// Skip applies a write to ingest/skip.
	Skip(value string) error
	// Status renders ingest/status.
	Status() ([]byte, error)
}

// IngestWriter is one batch being written into ingest/.
type IngestWriter interface {
	Fd() int
	WriteAt(p []byte, off int64) (int, error)
	Size() (int64, error)
	Truncate(n int64) error
	// Flush validates and publishes (a close); its error is the close's.
	Flush(ctx context.Context) error
	// Release ends the writer; an unpublished batch is dropped.
	Release()
	// Finished: published or refused, so the name is free for a new
	// create (which the store answers) though the kernel's release of
	// this one may not have come yet.
	Finished() bool
}

// ingestInoBase numbers the files being written (clear of the others).
// Each create takes a fresh number: a batch refused at close may be
// created again before the kernel forgets the first inode, and go-fuse
// would hand the new create the old node if their numbers matched.
const ingestInoBase = 1 << 60

// ingestDir is ingest/: the owner of the mount creates the next batch
// file there, writes it and closes it.
type ingestDir struct {
	readOnlyDir
	fs      *fileSystem
	writes  *atomic.Uint64 // writes that came to the daemon
	creates atomic.Uint64  // numbers the created inodes

	// names orders the removal of a finished writer's name (by a lookup
	// or by its release) against a create that reuses the name.
	names sync.Mutex
}

var (
	_ = (fusefs.NodeOnAdder)((*ingestDir)(nil))
	_ = (fusefs.NodeLookuper)((*ingestDir)(nil))
	_ = (fusefs.NodeCreater)((*ingestDir)(nil))
	_ = (fusefs.NodeGetattrer)((*ingestDir)(nil))
)

func (d *ingestDir) OnAdd(ctx context.Context) {
	in := d.fs.opts.Ingest
	uid, gid := mountOwner()
	files := map[string]fusefs.InodeEmbedder{
		"next":   &textFile{render: func() ([]byte, error) { return []byte(uitoa(in.Next()) + "\n"), nil }},
		"status": &textFile{render: in.Status},
		"order":  &waitingFile{render: in.Order},
		"skip": &controlFile{uid: uid, gid: gid, textFile: textFile{render: func() ([]byte, error) { return nil, nil }},
			set: in.Skip},
	}
	for name, node := range files {
		d.AddChild(name, d.NewPersistentInode(ctx, node, fusefs.StableAttr{Mode: syscall.S_IFREG}), false)
	}
}

// Getattr: the directory is writable by the mount's owner only.
func (d *ingestDir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o755
	out.Uid, out.Gid = mountOwner()
	return 0
}

// Lookup hides a finished writer: its close has returned, so to its
// writer the name is free to be created again.
func (d *ingestDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	d.names.Lock()
	if f, ok := d.writing(name); ok && f.w.Finished() {
		d.RmChild(name)
	}
	d.names.Unlock()
	return lookupChild(ctx, &d.Inode, name, out)
}

// writing returns the batch being written under name, if any.
func (d *ingestDir) writing(name string) (*ingestFile, bool) {
	child := d.GetChild(name)
	if child == nil {
		return nil, false
	}
	f, ok := child.Operations().(*ingestFile)
	return f, ok
}

// forget removes f's name unless a later create has taken it.
func (d *ingestDir) forget(name string, f *ingestFile) {
	d.names.Lock()
	defer d.names.Unlock()
	if cur, ok := d.writing(name); ok && cur == f {
		d.RmChild(name)
	}
}

// Create starts the next batch; it blocks while the buffer has no room.
func (d *ingestDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	if c, ok := fuse.FromContext(ctx); ok && c.Uid != 0 && c.Uid != uint32(os.Geteuid()) {
		return nil, nil, 0, syscall.EACCES
	}
	seq, cuda, ok := parseBatchName(name)
	if !ok || cuda {
		return nil, nil, 0, syscall.EINVAL
	}
	w, err := d.fs.opts.Ingest.Create(ctx, seq)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	node := &ingestFile{w: w}
	node.fillAttr(&out.Attr)
	child := d.NewInode(ctx, node, fusefs.StableAttr{Mode: syscall.S_IFREG, Ino: ingestInoBase + d.creates.Add(1)})
	h := &ingestHandle{w: w, dir: d, node: node, name: name, writes: d.writes}
	if d.fs.path.passthrough() {
		return child, &ingestPassthrough{h}, 0, 0
	}
	return child, h, fuse.FOPEN_DIRECT_IO, 0
}

// ingestFile is a batch being written.
type ingestFile struct {
	fusefs.Inode
	w IngestWriter
}

var (
	_ = (fusefs.NodeGetattrer)((*ingestFile)(nil))
	_ = (fusefs.NodeSetattrer)((*ingestFile)(nil))
	_ = (fusefs.NodeOpener)((*ingestFile)(nil))
)

func (f *ingestFile) fillAttr(attr *fuse.Attr) {
	size, _ := f.w.Size()
	fillFileAttr(attr, size, time.Time{})
	attr.Mode = syscall.S_IFREG | 0o644
	attr.Uid, attr.Gid = uint32(os.Geteuid()), uint32(os.Getegid())
}

func (f *ingestFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.fillAttr(&out.Attr)
	return 0
}

// Setattr applies a truncation (O_TRUNC, ftruncate); times and modes
// that copying tools set are accepted and ignored.
func (f *ingestFile) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		if err := f.w.Truncate(int64(size)); err != nil {
			return syscall.EIO
		}
	}
	f.fillAttr(&out.Attr)
	return 0
}

// Open of a batch being written by another open is refused: one writer.
// (A finished writer's name never gets here: entries time out at once,
// so every open looks the name up, and Lookup has freed it.)
func (f *ingestFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, syscall.EBUSY
}

// ingestHandle is the writer's open file.
type ingestHandle struct {
	w      IngestWriter
	dir    *ingestDir
	node   *ingestFile
	name   string
	writes *atomic.Uint64
}

var (
	_ = (fusefs.FileWriter)((*ingestHandle)(nil))
	_ = (fusefs.FileFlusher)((*ingestHandle)(nil))
	_ = (fusefs.FileReleaser)((*ingestHandle)(nil))
	_ = (fusefs.FileReader)((*ingestHandle)(nil))
)

// Write serves writes when passthrough is off.
func (h *ingestHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.writes.Add(1)
	n, err := h.w.WriteAt(data, off)
	if err != nil {
		return uint32(n), syscall.EIO
	}
	return uint32(n), 0
}

// Read lets a writer read back what it wrote (cp may).
func (h *ingestHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultFd(uintptr(h.w.Fd()), off, len(dest)), 0
}

// Flush is the writer's close: the batch is validated and published, or
// refused with the errno the close returns.
func (h *ingestHandle) Flush(ctx context.Context) syscall.Errno {
	return errno(h.w.Flush(ctx))
}

func (h *ingestHandle) Release(ctx context.Context) syscall.Errno {
	h.w.Release()
	h.dir.forget(h.name, h.node) // unless a later create has the name
	return 0
}

// ingestPassthrough lets the kernel write the batch's memory-backed file
// itself: the daemon sees only the create, the flush and the release.
type ingestPassthrough struct {
	*ingestHandle
}

var _ = (fusefs.FilePassthroughFder)((*ingestPassthrough)(nil))

func (h *ingestPassthrough) PassthroughFd() (int, bool) { return h.w.Fd(), true }

// waitingFile is a file whose content is made at open, which may wait
// (ingest/order): its size is unknown until then, so it is served with
// DIRECT_IO and reads go to the end of what the open made.
type waitingFile struct {
	readOnlyFile
	render func(ctx context.Context) ([]byte, error)
}

var (
	_ = (fusefs.NodeOpener)((*waitingFile)(nil))
	_ = (fusefs.NodeGetattrer)((*waitingFile)(nil))
)

func (f *waitingFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	if h, ok := fh.(*textHandle); ok {
		out.Size = uint64(len(h.data))
	}
	return 0
}

func (f *waitingFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&writeFlags != 0 {
		return nil, 0, syscall.EROFS
	}
	data, err := f.render(ctx)
	if err != nil {
		return nil, 0, errno(err)
	}
	return &textHandle{data: data}, fuse.FOPEN_DIRECT_IO, 0
}

func uitoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
