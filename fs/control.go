package fs

import (
	"bytes"
	"context"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	return d.numberFile(d.fs.store.BatchSize, d.fs.store.SetBatchSize)
}

// numberFile is a control file of one whole number of the consumer's,
// read with get and written with set.
func (d *consumerDir) numberFile(get func(string) (int, error), set func(string, int) error) *controlFile {
	return &controlFile{
		textFile: textFile{render: func() ([]byte, error) {
			n, err := get(d.name)
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
			return set(d.name, n)
		},
	}
}

// subsetFile is consumers/NAME/subset: a form (all, fold K/N, holdout
// K/N, classes …) applies at its write, like batch_size; a list of
// dataset indices, which may take many writes, applies at close.
type subsetFile struct {
	controlFile
	fs  *fileSystem
	set func(value []byte) error // applies what was written, unconverted
}

var _ = (fusefs.NodeOpener)((*subsetFile)(nil))

// maxSubsetBytes bounds what one subset file takes before its close: 8
// million indices as int64s; subsetBytesInFlight, what all of them take
// together.
const (
	maxSubsetBytes      = 64 << 20
	subsetBytesInFlight = 128 << 20
)

// giveBackAbove is the size of a refused or finished list whose memory is
// handed back to the system at once rather than when the runtime gets to
// it: a daemon should not stay large for a list it refused.
const giveBackAbove = 16 << 20

func (f *subsetFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR) == 0 {
		return f.textFile.Open(ctx, flags)
	}
	limit := int64(maxSubsetBytes)
	if f.fs.opts.SubsetBytes != nil {
		limit = min(limit, f.fs.opts.SubsetBytes())
	}
	caller, _ := fuse.FromContext(ctx)
	return &subsetHandle{apply: f.set, limit: limit, inFlight: &f.fs.subsetBytes, owner: writerOf(caller, f.StableAttr().Ino)},
		fuse.FOPEN_DIRECT_IO, 0
}

// subsetHandle gathers a subset as it is written, each piece at its
// offset: a program may write one list from several threads (pwrite), so
// a piece past what is gathered waits in ahead until the bytes before it
// come (a list left with a hole is refused at its close, EINVAL). A list
// refused (EFBIG, ENOSPC) stays refused for every later write: a writer
// told of a short write writes the rest at the next offset, and must be
// told the refusal again, not EINVAL. Only the writer's last close
// applies the list (Flush).
type subsetHandle struct {
	mu       sync.Mutex
	apply    func(value []byte) error
	limit    int64         // the most this list may take
	inFlight *atomic.Int64 // what every list being written holds
	buf      []byte
	ahead    map[int64][]byte // pieces past buf, by offset
	aheadLen int64            // their bytes
	dirty    bool             // written since last applied
	refused  syscall.Errno    // the list was refused (EFBIG, ENOSPC): so is every later write
	owner    writer           // the process writing it: only its last close applies the list
}

var (
	_ = (fusefs.FileWriter)((*subsetHandle)(nil))
	_ = (fusefs.FileFlusher)((*subsetHandle)(nil))
	_ = (fusefs.FileReleaser)((*subsetHandle)(nil))
)

func (h *subsetHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refused != 0 {
		return 0, h.refused
	}
	if _, twice := h.ahead[off]; off < int64(len(h.buf)) || twice {
		return 0, syscall.EINVAL // written over: a list is written once, from the start
	}
	n := int64(len(data))
	if max(off+n, int64(len(h.buf))+h.aheadLen+n) > h.limit {
		h.drop()
		h.refused = syscall.EFBIG
		return 0, syscall.EFBIG // longer than any subset of this dataset
	}
	if h.inFlight.Add(n) > subsetBytesInFlight {
		h.inFlight.Add(-n)
		h.drop()
		h.refused = syscall.ENOSPC
		return 0, syscall.ENOSPC // other lists being written hold the room
	}
	if off > int64(len(h.buf)) {
		if h.ahead == nil {
			h.ahead = map[int64][]byte{}
		}
		h.ahead[off] = bytes.Clone(data)
		h.aheadLen += n
		h.dirty = true
		return uint32(n), 0
	}
	h.buf = append(h.buf, data...)
	for p, ok := h.ahead[int64(len(h.buf))]; ok; p, ok = h.ahead[int64(len(h.buf))] {
		delete(h.ahead, int64(len(h.buf)))
		h.aheadLen -= int64(len(p))
		h.buf = append(h.buf, p...)
	}
	if len(h.buf) == len(data) && isForm(data) {
		// A form is one line, one write: apply it now, so that the write
		// itself fails for a bad one.
		err := h.apply(h.buf)
		h.drop()
		if err != nil {
			return 0, errno(err)
		}
		return uint32(len(data)), 0
	}
	h.dirty = true
	return uint32(len(data)), 0
}

// isForm tells a form from a list by what cannot be both: a list of
// int64s has a NUL byte in its first 8 (an index below 2^56), a text list
// is digits, and a form starts with its keyword. Never by the first byte
// alone: a binary list whose first index is 65 to 90 or 97 to 122 starts
// with a letter (it was applied as a one-line form, a consumer then read
// 72 epochs of sample 65 alone).
func isForm(data []byte) bool {
	if bytes.IndexByte(data, 0) >= 0 {
		return false
	}
	word, _, _ := bytes.Cut(bytes.TrimLeft(data, " \t\r\n"), []byte(" "))
	word = bytes.TrimRight(word, " \t\r\n")
	switch string(word) {
	case "all", "fold", "holdout", "classes":
		return true
	}
	return false
}

// Flush comes for every close of every copy of the descriptor: a
// forked child's (a DataLoader worker, a subprocess closing what it
// inherits at exec), a dup's. Only the writer's own last close applies
// the list (writer.lastClose, as for a batch in ingest/): a copy's close
// used to apply the part written so far (refused, "index 1 twice", and
// dropped under the writer, whose next write then failed EINVAL: what
// CI's parallel run met, a list written while another test started a
// process).
func (h *subsetHandle) Flush(ctx context.Context) syscall.Errno {
	caller, _ := fuse.FromContext(ctx)
	if !h.owner.lastClose(caller) {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.applyLocked()
}

// applyLocked applies a list written since it was last applied. Callers
// hold h.mu.
func (h *subsetHandle) applyLocked() syscall.Errno {
	if !h.dirty {
		return 0
	}
	h.dirty = false
	if len(h.ahead) > 0 { // a hole before some piece: not the list that was meant
		h.drop()
		return syscall.EINVAL
	}
	if err := h.apply(h.buf); err != nil {
		h.drop() // refused: nothing of it is kept
		return errno(err)
	}
	return 0
}

// Release comes once every copy is closed: a list no close of its
// writer's applied (the writer's last close came while a child still
// held a copy) is applied now, and a refusal of it shows in the
// consumer's status (last subset refused); then what it held is given
// back.
func (h *subsetHandle) Release(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.applyLocked()
	h.drop()
	return 0
}

// drop forgets what was written and gives its memory back. Callers hold
// h.mu.
func (h *subsetHandle) drop() {
	held := int64(len(h.buf)) + h.aheadLen
	h.inFlight.Add(-held)
	h.buf, h.ahead, h.aheadLen, h.dirty = nil, nil, 0, false
	if held >= giveBackAbove {
		debug.FreeOSMemory() // a full collection, once per large list: rare
	}
}

// subsetFile makes consumers/NAME/subset.
func (d *consumerDir) subsetFile() *subsetFile {
	return &subsetFile{fs: d.fs, controlFile: controlFile{
		textFile: textFile{render: func() ([]byte, error) {
			snap, err := d.fs.store.ConsumerSnapshot(d.name)
			if err != nil {
				return nil, err
			}
			return []byte(snap.Subset + "\n"), nil
		}},
	}, set: func(value []byte) error {
		if d.fs.opts.ParseSubset == nil {
			return fmt.Errorf("this mount takes no subsets: %w", batchstore.ErrBadSubset)
		}
		sub, err := d.fs.opts.ParseSubset(value)
		if err == nil {
			err = d.fs.store.SetSubset(d.name, sub)
		}
		if err != nil {
			d.fs.store.RefusedSubset(d.name, err) // EINVAL cannot say why; status can
		}
		return err
	}}
}

// readAheadFile is consumers/NAME/read_ahead: 1 (the default) where the
// daemon reads each of its batches ahead into the page cache once it is
// looked up (without passthrough: the way a reader through FUSE reads
// fast); 0 where its reader reads around FUSE (the direct path,
// DirectXattr: the Python client writes 0 once it has mapped a batch so),
// and the read-ahead would only cost the daemon's CPU. A group's holds
// for its ranks.
func (d *consumerDir) readAheadFile() *controlFile {
	return &controlFile{
		textFile: textFile{render: func() ([]byte, error) {
			if d.fs.readsAroundFUSE(d.name) {
				return []byte("0\n"), nil
			}
			return []byte("1\n"), nil
		}},
		set: func(value string) error {
			switch value {
			case "1":
				d.fs.aroundFUSE.Delete(d.name)
				return nil
			case "0":
				d.fs.aroundFUSE.Store(d.name, struct{}{})
				return nil
			}
			return errBadValue
		},
	}
}
