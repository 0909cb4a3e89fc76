package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// consumersDir is consumers/: mkdir joins, rmdir leaves. As /tmp (and
// cgroupfs delegation): anyone may join, and the sticky bit lets only a
// consumer's owner (or root) remove it.
type consumersDir struct {
	readOnlyDir
	fs *fileSystem
}

var (
	_ = (fusefs.NodeMkdirer)((*consumersDir)(nil))
	_ = (fusefs.NodeRmdirer)((*consumersDir)(nil))
	_ = (fusefs.NodeGetattrer)((*consumersDir)(nil))
)

func (d *consumersDir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | syscall.S_ISVTX | 0o777
	out.Uid, out.Gid = mountOwner()
	return 0
}

func (d *consumersDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if err := d.fs.store.Join(name); err != nil {
		return nil, errno(err)
	}
	return newConsumerDir(ctx, &d.Inode, &consumerDir{fs: d.fs, name: name, controls: controlNames}, out), 0
}

// newConsumerDir makes dir (a consumer's or a rank's) a child inode of
// parent, owned by the caller that made it.
func newConsumerDir(ctx context.Context, parent *fusefs.Inode, dir *consumerDir, out *fuse.EntryOut) *fusefs.Inode {
	if c, ok := fuse.FromContext(ctx); ok {
		dir.uid, dir.gid = c.Uid, c.Gid
	}
	// Persistent: the directory must stay listed even when the kernel
	// forgets its inode; Rmdir drops it.
	child := parent.NewPersistentInode(ctx, dir, fusefs.StableAttr{Mode: syscall.S_IFDIR})
	dir.fillAttr(&out.Attr)
	return child
}

func (d *consumersDir) Rmdir(ctx context.Context, name string) syscall.Errno {
	if err := d.fs.store.Leave(name); err != nil {
		return errno(err)
	}
	d.fs.aroundFUSE.Delete(name) // a consumer of that name later is another's
	if child := d.GetChild(name); child != nil {
		child.ForgetPersistent()
	}
	return 0
}
