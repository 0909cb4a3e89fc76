package fs

import (
	"context"
	"sync/atomic"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// readOnlyDir refuses every change to a directory; directories that allow
// one (mkdir in consumers/, unlink of a batch) override that method.
type readOnlyDir struct {
	fusefs.Inode
}

var (
	_ = (fusefs.NodeMkdirer)((*readOnlyDir)(nil))
	_ = (fusefs.NodeCreater)((*readOnlyDir)(nil))
	_ = (fusefs.NodeMknoder)((*readOnlyDir)(nil))
	_ = (fusefs.NodeSymlinker)((*readOnlyDir)(nil))
	_ = (fusefs.NodeLinker)((*readOnlyDir)(nil))
	_ = (fusefs.NodeRenamer)((*readOnlyDir)(nil))
	_ = (fusefs.NodeUnlinker)((*readOnlyDir)(nil))
	_ = (fusefs.NodeRmdirer)((*readOnlyDir)(nil))
	_ = (fusefs.NodeSetattrer)((*readOnlyDir)(nil))
	_ = (fusefs.NodeGetattrer)((*readOnlyDir)(nil))
)

// Getattr: a directory anyone may list, owned by the mount's owner (the
// kernel checks permissions: default_permissions).
func (*readOnlyDir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o755
	out.Uid, out.Gid = mountOwner()
	return 0
}

func (*readOnlyDir) Mkdir(context.Context, string, uint32, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (*readOnlyDir) Create(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (*readOnlyDir) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (*readOnlyDir) Symlink(context.Context, string, string, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (*readOnlyDir) Link(context.Context, fusefs.InodeEmbedder, string, *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (*readOnlyDir) Rename(context.Context, string, fusefs.InodeEmbedder, string, uint32) syscall.Errno {
	return syscall.EROFS
}

func (*readOnlyDir) Unlink(context.Context, string) syscall.Errno { return syscall.EROFS }

func (*readOnlyDir) Rmdir(context.Context, string) syscall.Errno { return syscall.EROFS }

func (*readOnlyDir) Setattr(context.Context, fusefs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

// writeFlags are the open flags that would change a file.
const writeFlags = syscall.O_WRONLY | syscall.O_RDWR | syscall.O_TRUNC | syscall.O_APPEND

// readOnlyFile refuses changes to a file's attributes.
type readOnlyFile struct {
	fusefs.Inode
	// forgotten: the kernel dropped its last reference and go-fuse its
	// inode (OnForget); a later lookup makes a new node, so it is never
	// cleared. The forgetter stops asking for it then.
	forgotten atomic.Bool
	// batch: the file is producer batch seq's, whose bytes other
	// consumers may still read while the store holds it: the forgetter
	// leaves its inode, and with it the page cache its consumers share,
	// until the store says it freed the batch (Invalidator).
	batch bool
	seq   uint64
}

var (
	_ = (fusefs.NodeSetattrer)((*readOnlyFile)(nil))
	_ = (fusefs.NodeOnForgetter)((*readOnlyFile)(nil))
)

// OnForget records that the kernel has forgotten the file.
func (f *readOnlyFile) OnForget() { f.forgotten.Store(true) }

func (*readOnlyFile) Setattr(context.Context, fusefs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
