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
	status := &textFile{render: r.fs.opts.Status}
	r.AddChild("status", r.NewPersistentInode(ctx, status, fusefs.StableAttr{Mode: syscall.S_IFREG}), false)
	consumers := &consumersDir{fs: r.fs}
	r.AddChild("consumers", r.NewPersistentInode(ctx, consumers, fusefs.StableAttr{Mode: syscall.S_IFDIR}), false)
}

// fileSystem is what every node shares.
type fileSystem struct {
	store *batchstore.Store
	opts  Options
	path  *dataPath
}
