package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tsock/tsock/batchstore"
)

// rebatchedInoBase keeps re-batched inode numbers clear of batch inodes
// and of go-fuse's automatic ones (from 2^63).
const rebatchedInoBase = 1 << 62

// rebatchedIno is unique per consumer and batch number.
func rebatchedIno(consumer int, local uint64) uint64 {
	return consumerIno(rebatchedInoBase, consumer, local)
}

// consumerIno numbers a file that belongs to one consumer's batch: the
// kind's base, the consumer's id, the batch number.
func consumerIno(base uint64, consumer int, local uint64) uint64 {
	return base | uint64(consumer)<<36 | local&(1<<36-1)
}

// rebatchedFile is one consumer's batch that is not one producer batch as
// produced: its own batch size, or an epoch stitched across two producer
// epochs. The daemon assembles its reads from the producer batches, so
// no second copy of the samples is kept.
type rebatchedFile struct {
	readOnlyFile
	fs   *fileSystem
	name string
	ref  batchstore.Ref
}

var (
	_ = (fusefs.NodeOpener)((*rebatchedFile)(nil))
	_ = (fusefs.NodeGetattrer)((*rebatchedFile)(nil))
)

func (f *rebatchedFile) fillAttr(attr *fuse.Attr) { fillFileAttr(attr, f.ref.Size, f.ref.Time) }

func (f *rebatchedFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.fillAttr(&out.Attr)
	return 0
}

func (f *rebatchedFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&writeFlags != 0 {
		return nil, 0, syscall.EROFS
	}
	lease, err := f.fs.store.OpenBatch(f.name, f.ref.Local)
	if err != nil {
		return nil, 0, errno(err)
	}
	comp, err := f.fs.opts.Compose(f.ref, lease.Blobs(), f.name)
	if err != nil {
		lease.Release()
		return nil, 0, errno(err)
	}
	h := &batchHandle{lease: lease, path: f.fs.path, data: comp, served: &f.fs.path.rebatchedBytes, forget: f.fs.forget,
		node: &f.readOnlyFile}
	return &rebatchedHandle{batchHandle: h, file: f}, fuse.FOPEN_KEEP_CACHE, 0
}

// rebatchedHandle drops the file's page cache at release: the kernel's
// copy of a re-batched file would otherwise be a second copy of samples
// the buffer holds, kept until memory pressure evicts it.
type rebatchedHandle struct {
	*batchHandle
	file *rebatchedFile
}

var _ = (fusefs.FileReleaser)((*rebatchedHandle)(nil))

func (h *rebatchedHandle) Release(ctx context.Context) syscall.Errno {
	h.batchHandle.Release(ctx)
	// Asynchronously: the kernel must not wait on us while it invalidates.
	h.file.fs.notifies.Go(func() { h.file.NotifyContent(0, 0) })
	return 0
}

// newBatchInode returns the inode for ref under consumer dir d.
func (d *consumerDir) newBatchInode(ctx context.Context, ref batchstore.Ref, out *fuse.EntryOut) *fusefs.Inode {
	if ref.Direct {
		node := d.fs.newBatchFile(ref.Seq, ref.Size, ref.Time)
		node.fillAttr(&out.Attr)
		if !d.fs.readsAroundFUSE(d.name) {
			d.fs.fill.want(node)
		}
		return d.NewInode(ctx, node, fusefs.StableAttr{Mode: syscall.S_IFREG, Ino: batchIno(ref.Seq)})
	}
	node := &rebatchedFile{fs: d.fs, name: d.name, ref: ref}
	node.fillAttr(&out.Attr)
	return d.NewInode(ctx, node, fusefs.StableAttr{Mode: syscall.S_IFREG, Ino: rebatchedIno(ref.Consumer, ref.Local)})
}

// Composer assembles consumer's re-batched file ref from the producer
// batches it spans; the format is the producer's business.
type Composer func(ref batchstore.Ref, blobs map[uint64]batchstore.Blob, consumer string) (BatchData, error)
