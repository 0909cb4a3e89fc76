package fs

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tsock/tsock/batchstore"
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

// subsetFile is consumers/NAME/subset: a form (all, fold K/N, holdout
// K/N, classes …) applies at its write, like batch_size; a list of
// dataset indices, which may take many writes, applies at close.
type subsetFile struct {
	controlFile
}

var _ = (fusefs.NodeOpener)((*subsetFile)(nil))

// maxSubsetBytes bounds what a subset file takes before its close: 8
// million indices as int64s.
const maxSubsetBytes = 64 << 20

func (f *subsetFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR) == 0 {
		return f.textFile.Open(ctx, flags)
	}
	return &subsetHandle{apply: f.set}, fuse.FOPEN_DIRECT_IO, 0
}

// subsetHandle gathers a subset as it is written.
type subsetHandle struct {
	mu    sync.Mutex
	apply func(value string) error
	buf   []byte
	dirty bool // written since last applied
}

var (
	_ = (fusefs.FileWriter)((*subsetHandle)(nil))
	_ = (fusefs.FileFlusher)((*subsetHandle)(nil))
)

func (h *subsetHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off != int64(len(h.buf)) || len(h.buf)+len(data) > maxSubsetBytes {
		return 0, syscall.EINVAL // in order, from the start, bounded
	}
	h.buf = append(h.buf, data...)
	if len(h.buf) == len(data) && len(data) > 0 && isLetter(data[0]) {
		// A form is one line, one write: apply it now, so that the write
		// itself fails for a bad one.
		err := h.apply(string(h.buf))
		if err != nil {
			h.buf = h.buf[:0]
			return 0, errno(err)
		}
		return uint32(len(data)), 0
	}
	h.dirty = true
	return uint32(len(data)), 0
}

// Flush applies a list written since the last flush: every close of a
// copy of the descriptor flushes, and the last one sees the whole list.
func (h *subsetHandle) Flush(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.dirty {
		return 0
	}
	h.dirty = false
	if err := h.apply(string(h.buf)); err != nil {
		return errno(err)
	}
	return 0
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// subsetFile makes consumers/NAME/subset.
func (d *consumerDir) subsetFile() *subsetFile {
	return &subsetFile{controlFile{
		textFile: textFile{render: func() ([]byte, error) {
			snap, err := d.fs.store.ConsumerSnapshot(d.name)
			if err != nil {
				return nil, err
			}
			return []byte(snap.Subset + "\n"), nil
		}},
		set: func(value string) error {
			if d.fs.opts.ParseSubset == nil {
				return fmt.Errorf("this mount takes no subsets: %w", batchstore.ErrBadSubset)
			}
			sub, err := d.fs.opts.ParseSubset([]byte(value))
			if err == nil {
				err = d.fs.store.SetSubset(d.name, sub)
			}
			if err != nil {
				d.fs.store.RefusedSubset(d.name, err) // EINVAL cannot say why; status can
			}
			return err
		},
	}}
}
