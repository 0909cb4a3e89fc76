package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/tsock/tsock/batchstore"
)

// root is the mount's top directory: status and consumers/.
type root struct {
	readOnlyDir
	fs *fileSystem
}

var _ = (fusefs.NodeOnAdder)((*root)(nil))

func (r *root) OnAdd(ctx context.Context) {
	for name, render := range map[string]func() ([]byte, error){"status": r.fs.opts.Status, "state": r.fs.opts.State, "metrics": r.fs.opts.Metrics} {
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
}
