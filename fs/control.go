package fs

import (
	"context"
	"strconv"
	"strings"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// controlFile is a one-value file that can be written, like a cgroupfs
// knob: reading gives the value and a newline; writing a new value
// applies it at once, and a bad value fails the write with EINVAL (or
// whatever set says) and changes nothing.
type controlFile struct {
	textFile
	set      func(value string) error
	uid, gid uint32 // who may write it (with root)
}

var (
	_ = (fusefs.NodeOpener)((*controlFile)(nil))
	_ = (fusefs.NodeSetattrer)((*controlFile)(nil))
)

func (f *controlFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR) == 0 {
		return f.textFile.Open(ctx, flags)
	}
	return &controlHandle{set: f.set}, fuse.FOPEN_DIRECT_IO, 0
}

// Setattr accepts the truncation that `echo 64 > file` asks for first,
// and nothing else.
func (f *controlFile) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); !ok || size != 0 || in.Valid&^(fuse.FATTR_SIZE|fuse.FATTR_FH|fuse.FATTR_LOCKOWNER|fuse.FATTR_MTIME|fuse.FATTR_CTIME|fuse.FATTR_MTIME_NOW) != 0 {
		return syscall.EROFS
	}
	return f.fillAttr(&out.Attr)
}

func (f *controlFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if _, ok := fh.(*controlHandle); ok {
		out.Mode = syscall.S_IFREG | 0o644
		out.Uid, out.Gid = f.uid, f.gid
		return 0
	}
	return f.fillAttr(&out.Attr)
}

func (f *controlFile) fillAttr(attr *fuse.Attr) syscall.Errno {
	errno := f.textFile.fillAttr(attr)
	attr.Mode = syscall.S_IFREG | 0o644
	attr.Uid, attr.Gid = f.uid, f.gid
	return errno
}

type controlHandle struct {
	set func(value string) error
}

var _ = (fusefs.FileWriter)((*controlHandle)(nil))

func (h *controlHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if off != 0 {
		return 0, syscall.EINVAL // one value per write, from the start
	}
	if err := h.set(strings.TrimSpace(string(data))); err != nil {
		return 0, errno(err)
	}
	return uint32(len(data)), 0
}

// batchSizeFile is consumers/NAME/batch_size.
func (d *consumerDir) batchSizeFile() *controlFile {
	return &controlFile{
		textFile: textFile{render: func() ([]byte, error) {
			n, err := d.fs.store.BatchSize(d.name)
			if err != nil {
				return nil, err
			}
			return []byte(strconv.Itoa(n) + "\n"), nil
		}},
		set: func(value string) error {
			n, err := strconv.Atoi(value)
			if err != nil {
				return errBadValue
			}
			return d.fs.store.SetBatchSize(d.name, n)
		},
	}
}
