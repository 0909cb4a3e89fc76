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
	for name, render := range map[string]func() ([]byte, error){"status": r.fs.opts.Status, "metrics": r.fs.opts.Metrics} {
		if render != nil {
			file := &textFile{render: render}
			r.AddChild(name, r.NewPersistentInode(ctx, file, fusefs.StableAttr{Mode: syscall.S_IFREG}), false)
		}
	}
	consumers := &consumersDir{fs: r.fs}
	r.AddChild("consumers", r.NewPersistentInode(ctx, consumers, fusefs.StableAttr{Mode: syscall.S_IFDIR}), false)
}

// fileSystem is what every node shares.
type fileSystem struct {
	store *batchstore.Store
	opts  Options
	path  *dataPath
}
