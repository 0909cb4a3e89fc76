package fs

import (
	"context"
	"log/slog"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tsock/tsock/batchstore"
)

// CUDAFiles renders the .cuda control files; the format is the
// producer's business (producer.CUDAFiles).
type CUDAFiles interface {
	// Size is the exact length of consumer's file for ref, known before
	// the batch is leased (stat must be exact).
	Size(ref batchstore.Ref, consumer string) (int64, error)
	Render(ref batchstore.Ref, blobs map[uint64]batchstore.Blob, consumer string) ([]byte, error)
}

// cudaInoBase keeps CUDA control file inodes clear of the others.
const cudaInoBase = 1 << 61

func cudaIno(consumer int, local uint64) uint64 { return consumerIno(cudaInoBase, consumer, local) }

// cudaFile is consumers/NAME/NNNNNN.cuda: where the batch's tensors lie on
// the GPU. Opening it holds the batch exactly as opening the .safetensors
// does, so the GPU memory stays valid until the last close, and a crashed
// consumer's files, closed by the kernel, give it back.
type cudaFile struct {
	readOnlyFile
	fs   *fileSystem
	name string
	ref  batchstore.Ref
	size int64
}

var (
	_ = (fusefs.NodeOpener)((*cudaFile)(nil))
	_ = (fusefs.NodeGetattrer)((*cudaFile)(nil))
)

func (d *consumerDir) newCUDAInode(ctx context.Context, ref batchstore.Ref, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	size, err := d.fs.opts.CUDA.Size(ref, d.name)
	if err != nil {
		slog.Error("size of a .cuda file", "consumer", d.name, "batch", ref.Local, "err", err)
		return nil, syscall.EIO
	}
	node := &cudaFile{fs: d.fs, name: d.name, ref: ref, size: size}
	node.fillAttr(&out.Attr)
	return d.NewInode(ctx, node, fusefs.StableAttr{Mode: syscall.S_IFREG, Ino: cudaIno(ref.Consumer, ref.Local)}), 0
}

func (f *cudaFile) fillAttr(attr *fuse.Attr) { fillFileAttr(attr, f.size, f.ref.Time) }

func (f *cudaFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.fillAttr(&out.Attr)
	return 0
}

func (f *cudaFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&writeFlags != 0 {
		return nil, 0, syscall.EROFS
	}
	lease, err := f.fs.store.OpenBatch(f.name, f.ref.Local)
	if err != nil {
		return nil, 0, errno(err)
	}
	body, err := f.fs.opts.CUDA.Render(f.ref, lease.Blobs(), f.name)
	if err != nil {
		lease.Release()
		slog.Error("render a .cuda file", "consumer", f.name, "batch", f.ref.Local, "err", err)
		return nil, 0, syscall.EIO
	}
	return &batchHandle{lease: lease, path: f.fs.path, data: bytesData(body), forget: f.fs.forget, node: &f.readOnlyFile}, 0, 0
}

// bytesData is BatchData held in memory.
type bytesData []byte

func (b bytesData) Size() int64 { return int64(len(b)) }

func (b bytesData) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, nil
	}
	return copy(p, b[off:]), nil
}
