package fs

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tsock/tsock/batchstore"
)

// root is the mount's top directory: status and consumers/.
type root struct {
	readOnlyDir
	fs *fileSystem
}

var (
	_ = (fusefs.NodeOnAdder)((*root)(nil))
	_ = (fusefs.NodeLookuper)((*root)(nil))
	_ = (fusefs.NodeReaddirer)((*root)(nil))
)

// Lookup waits until the mount is ready: every path goes through here
// (entry timeouts are zero), so nothing is served before Mount has set
// what handlers read (the data path probed, the caller's own state).
func (r *root) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	select {
	case <-r.fs.ready:
	case <-ctx.Done():
		return nil, syscall.EINTR
	}
	if name == fillDirName {
		return r.fillDir(ctx, out)
	}
	return lookupChild(ctx, &r.Inode, name, out)
}

// fillDir is the filler's hidden directory, made at its first lookup;
// none with passthrough.
func (r *root) fillDir(ctx context.Context, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if r.fs.fill == nil {
		return nil, syscall.ENOENT
	}
	dir := &fillDir{fs: r.fs}
	var a fuse.AttrOut
	dir.Getattr(ctx, nil, &a)
	out.Attr = a.Attr
	return r.NewPersistentInode(ctx, dir, fusefs.StableAttr{Mode: syscall.S_IFDIR, Ino: fillDirIno}), 0
}

// Readdir lists the fixed children, not the filler's directory.
func (r *root) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	var entries []fuse.DirEntry
	for name, child := range r.Children() {
		if name != fillDirName {
			entries = append(entries, fuse.DirEntry{Name: name, Mode: child.Mode(), Ino: child.StableAttr().Ino})
		}
	}
	slices.SortFunc(entries, func(a, b fuse.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	return fusefs.NewListDirStream(entries), 0
}

// lookupChild answers a lookup of one of dir's fixed children.
func lookupChild(ctx context.Context, dir *fusefs.Inode, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	child := dir.GetChild(name)
	if child == nil {
		return nil, syscall.ENOENT
	}
	if g, ok := child.Operations().(fusefs.NodeGetattrer); ok {
		var a fuse.AttrOut
		if errno := g.Getattr(ctx, nil, &a); errno != 0 {
			return nil, errno
		}
		out.Attr = a.Attr
	}
	return child, 0
}

func (r *root) OnAdd(ctx context.Context) {
	for name, render := range map[string]func() ([]byte, error){
		"status": r.fs.opts.Status, "state": r.fs.opts.State, "metrics": r.fs.opts.Metrics, "status.json": r.fs.opts.StatusJSON,
		"classes": r.fs.opts.Classes,
	} {
		if render != nil {
			file := &textFile{render: render}
			r.AddChild(name, r.NewPersistentInode(ctx, file, fusefs.StableAttr{Mode: syscall.S_IFREG}), false)
		}
	}
	if len(r.fs.opts.GPU) > 0 {
		gpu := &filesDir{files: r.fs.opts.GPU}
		r.AddChild("gpu", r.NewPersistentInode(ctx, gpu, fusefs.StableAttr{Mode: syscall.S_IFDIR}), false)
	}
	if r.fs.opts.Ingest != nil {
		ingest := &ingestDir{fs: r.fs, writes: &r.fs.path.daemonWrites}
		r.AddChild("ingest", r.NewPersistentInode(ctx, ingest, fusefs.StableAttr{Mode: syscall.S_IFDIR}), false)
	}
	consumers := &consumersDir{fs: r.fs}
	r.AddChild("consumers", r.NewPersistentInode(ctx, consumers, fusefs.StableAttr{Mode: syscall.S_IFDIR}), false)
}

// filesDir is a directory of control files, fixed at mount.
type filesDir struct {
	readOnlyDir
	files map[string]func() ([]byte, error)
}

var _ = (fusefs.NodeOnAdder)((*filesDir)(nil))

func (d *filesDir) OnAdd(ctx context.Context) {
	for name, render := range d.files {
		d.AddChild(name, d.NewPersistentInode(ctx, &textFile{render: render}, fusefs.StableAttr{Mode: syscall.S_IFREG}), false)
	}
}

// fileSystem is what every node shares.
type fileSystem struct {
	store *batchstore.Store
	opts  Options
	path  *dataPath
	root  *root
	// forget is told of every batch file released, a consumer's or the
	// filler's.
	forget *forgetter
	// fill reads batches ahead when the daemon serves reads; nil with
	// passthrough.
	fill *filler
	// notifies are the content invalidations of released re-batched files
	// under way (asynchronous: the kernel must not wait on us while it
	// invalidates); Mounted.Unmount waits for them.
	notifies sync.WaitGroup
	// ready is closed once Mount (and its caller's Serving) are done.
	ready chan struct{}
	// subsetBytes is what subset lists being written hold, all of them:
	// at most subsetBytesInFlight, so that writers cannot together take
	// the daemon's memory (8 of 64 MiB each took it from 307 to 1,433 MiB).
	subsetBytes atomic.Int64
	// aroundFUSE: the consumers (by name) whose reader said, by writing 0
	// to their read_ahead file, that it reads batches around FUSE (the
	// direct path, DirectXattr): the filler does not read their batches
	// ahead into a page cache nobody would read.
	aroundFUSE sync.Map
}

// readsAroundFUSE says whether consumer name (or, for a rank, its group)
// reads its batches around FUSE.
func (fsys *fileSystem) readsAroundFUSE(name string) bool {
	group, _, _ := strings.Cut(name, "/")
	_, ok := fsys.aroundFUSE.Load(group)
	return ok
}
