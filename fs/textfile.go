package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// textFile is a control file whose content is made at open: each open
// sees one consistent snapshot, served with DIRECT_IO so nothing stale
// stays in the page cache.
type textFile struct {
	readOnlyFile
	render func() ([]byte, error)
}

var (
	_ = (fusefs.NodeOpener)((*textFile)(nil))
	_ = (fusefs.NodeGetattrer)((*textFile)(nil))
)

func (f *textFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*textHandle); ok {
		out.Mode = syscall.S_IFREG | 0o444
		out.Size = uint64(len(h.data))
		return 0
	}
	return f.fillAttr(&out.Attr)
}

// fillAttr gives the size of the content an open would see now.
func (f *textFile) fillAttr(attr *fuse.Attr) syscall.Errno {
	attr.Mode = syscall.S_IFREG | 0o444
	data, err := f.render()
	if err != nil {
		return errno(err)
	}
	attr.Size = uint64(len(data))
	return 0
}

func (f *textFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&writeFlags != 0 {
		return nil, 0, syscall.EROFS
	}
	data, err := f.render()
	if err != nil {
		return nil, 0, errno(err)
	}
	return &textHandle{data: data}, fuse.FOPEN_DIRECT_IO, 0
}

type textHandle struct {
	data []byte
}

var _ = (fusefs.FileReader)((*textHandle)(nil))

func (h *textHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(h.data)) {
		return bytesReply(nil), 0
	}
	return bytesReply(h.data[off:min(int64(len(h.data)), off+int64(len(dest)))]), 0
}
