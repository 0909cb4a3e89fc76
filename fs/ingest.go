package fs

import (
	"context"
	"errors"
	"io"
	"math"
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
	// Refusal renders ingest/refusal: the last batch refused at close and
	// why, one line, for programs; empty before any refusal.
	Refusal() ([]byte, error)
	// SamplesText renders ingest/samples; Grow applies a write to it.
	SamplesText() ([]byte, error)
	Grow(value string) error
}

// IngestWriter is one batch being written into ingest/. Its bytes come
// through the daemon: each write is bounded by the buffer as it comes,
// and none lands after the verdict.
type IngestWriter interface {
	WriteAt(ctx context.Context, p []byte, off int64) (int, error)
	ReadAt(p []byte, off int64) (int, error)
	Size() int64
	Truncate(ctx context.Context, n int64) error
	// Close validates and publishes (the writer's own close); its error is
	// the close's. Later calls do nothing.
	Close(ctx context.Context) error
	// Release ends the writer: a batch its close left unruled is ruled,
	// an unpublished one dropped.
	Release(ctx context.Context)
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
		"next":    &textFile{render: func() ([]byte, error) { return []byte(uitoa(in.Next()) + "\n"), nil }},
		"status":  &textFile{render: in.Status},
		"refusal": &textFile{render: in.Refusal},
		"order":   &waitingFile{render: in.Order},
		"skip": &controlFile{uid: uid, gid: gid, textFile: textFile{render: func() ([]byte, error) { return nil, nil }},
			set: in.Skip},
		"samples": &controlFile{uid: uid, gid: gid, textFile: textFile{render: in.SamplesText}, set: in.Grow},
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
// Writes are served by the daemon (DIRECT_IO, no passthrough) so that it
// can bound them and refuse them once the batch is final; a mapping of a
// batch being written is refused (ENODEV).
func (d *ingestDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	caller, _ := fuse.FromContext(ctx)
	if caller != nil && caller.Uid != 0 && caller.Uid != uint32(os.Geteuid()) {
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
	ino := ingestInoBase + d.creates.Add(1)
	child := d.NewInode(ctx, node, fusefs.StableAttr{Mode: syscall.S_IFREG, Ino: ino})
	h := &ingestHandle{w: w, dir: d, node: node, name: name, writes: d.writes, owner: writerOf(caller, ino)}
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
	fillFileAttr(attr, f.w.Size(), time.Time{})
	attr.Mode = syscall.S_IFREG | 0o644
	attr.Uid, attr.Gid = uint32(os.Geteuid()), uint32(os.Getegid())
}

func (f *ingestFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.fillAttr(&out.Attr)
	return 0
}

// Setattr applies a truncation (O_TRUNC, ftruncate) within the writes'
// bounds; times and modes that copying tools set are accepted and ignored.
func (f *ingestFile) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		if err := f.w.Truncate(ctx, int64(min(size, math.MaxInt64))); err != nil {
			return errno(err)
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

// ingestHandle is the writer's open file, which every copy of its
// descriptor shares (dup, fork, SCM_RIGHTS).
type ingestHandle struct {
	w      IngestWriter
	dir    *ingestDir
	node   *ingestFile
	name   string
	writes *atomic.Uint64
	owner  writer
}

var (
	_ = (fusefs.FileWriter)((*ingestHandle)(nil))
	_ = (fusefs.FileFlusher)((*ingestHandle)(nil))
	_ = (fusefs.FileReleaser)((*ingestHandle)(nil))
	_ = (fusefs.FileReader)((*ingestHandle)(nil))
)

func (h *ingestHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.writes.Add(1)
	n, err := h.w.WriteAt(ctx, data, off)
	return uint32(n), errno(err)
}

// Read lets a writer read back what it wrote (cp may).
func (h *ingestHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := h.w.ReadAt(dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, errno(err)
	}
	return bytesReply(dest[:n]), 0
}

// Flush comes for every close of every copy of the descriptor. Only the
// writer's own last close rules on the batch (see writer.lastClose); the
// close of a copy elsewhere (a subprocess, a dup) neither publishes nor
// refuses.
func (h *ingestHandle) Flush(ctx context.Context) syscall.Errno {
	caller, _ := fuse.FromContext(ctx)
	if !h.owner.lastClose(caller) {
		return 0
	}
	return errno(h.w.Close(ctx))
}

func (h *ingestHandle) Release(ctx context.Context) syscall.Errno {
	h.w.Release(ctx)
	h.dir.forget(h.name, h.node) // unless a later create has the name
	return 0
}

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
