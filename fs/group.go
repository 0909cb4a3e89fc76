package fs

import (
	"context"
	"strconv"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tsock/tsock/batchstore"
)

// A group's files: consumers/NAME/world makes NAME a group of that many
// ranks (drop_last says how an epoch's uneven tail is dealt), and
// mkdir consumers/NAME/R claims rank R, whose directory holds its
// batches as a consumer's does, and its alive file, which the rank's
// process holds open while it reads (batchstore/group.go).

// parseRank reads a rank directory's name: a number as strconv writes it.
func parseRank(name string) (int, bool) {
	r, err := strconv.Atoi(name)
	return r, err == nil && r >= 0 && strconv.Itoa(r) == name
}

// worldFile is consumers/NAME/world: 0 where NAME is not a group.
func (d *consumerDir) worldFile() *controlFile {
	return d.numberFile(d.fs.store.World, d.fs.store.SetWorld)
}

// dropLastFile is consumers/NAME/drop_last: 1 or 0.
func (d *consumerDir) dropLastFile() *controlFile {
	return &controlFile{
		textFile: textFile{render: func() ([]byte, error) {
			drop, err := d.fs.store.DropLast(d.name)
			if err != nil {
				return nil, err
			}
			if drop {
				return []byte("1\n"), nil
			}
			return []byte("0\n"), nil
		}},
		set: func(value string) error {
			switch value {
			case "1":
				return d.fs.store.SetDropLast(d.name, true)
			case "0":
				return d.fs.store.SetDropLast(d.name, false)
			}
			return errBadValue
		},
	}
}

// Mkdir claims a rank of the group.
func (d *consumerDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	r, ok := parseRank(name)
	if !ok || d.controls["alive"] { // not a number, or in a rank's directory
		return nil, syscall.EINVAL
	}
	if err := d.fs.store.JoinRank(d.name, r); err != nil {
		return nil, errno(err)
	}
	return newConsumerDir(ctx, &d.Inode, &consumerDir{fs: d.fs, name: batchstore.RankName(d.name, r), controls: rankControlNames}, out), 0
}

// Rmdir leaves a rank: before its end, that fails its group.
func (d *consumerDir) Rmdir(ctx context.Context, name string) syscall.Errno {
	r, ok := parseRank(name)
	if !ok {
		return syscall.ENOENT
	}
	if err := d.fs.store.LeaveRank(batchstore.RankName(d.name, r)); err != nil {
		return errno(err)
	}
	if child := d.GetChild(name); child != nil {
		child.ForgetPersistent()
	}
	return 0
}

// lookupRank finds a claimed rank's directory.
func (d *consumerDir) lookupRank(name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	child := d.GetChild(name)
	if child == nil {
		return nil, syscall.ENOENT
	}
	dir, ok := child.Operations().(*consumerDir)
	if !ok {
		return nil, syscall.ENOENT
	}
	dir.fillAttr(&out.Attr)
	return child, 0
}

// rankEntries lists the claimed ranks' directories.
func (d *consumerDir) rankEntries() []fuse.DirEntry {
	var entries []fuse.DirEntry
	for name, child := range d.Children() {
		if _, ok := child.Operations().(*consumerDir); ok {
			entries = append(entries, fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR, Ino: child.StableAttr().Ino})
		}
	}
	return entries
}

// aliveFile is consumers/GROUP/R/alive: empty; the rank's process holds
// it open while it reads, and its last close before the rank's end (the
// process exited, however) fails the group at once.
type aliveFile struct {
	readOnlyFile
	fs       *fileSystem
	name     string
	uid, gid uint32
}

var (
	_ = (fusefs.NodeOpener)((*aliveFile)(nil))
	_ = (fusefs.NodeGetattrer)((*aliveFile)(nil))
)

func (f *aliveFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	f.fillAttr(&out.Attr)
	return 0
}

func (f *aliveFile) fillAttr(attr *fuse.Attr) syscall.Errno {
	attr.Mode = syscall.S_IFREG | 0o400
	attr.Uid, attr.Gid = f.uid, f.gid
	return 0
}

func (f *aliveFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0 {
		return nil, 0, syscall.EACCES
	}
	if err := f.fs.store.RankOpened(f.name); err != nil {
		return nil, 0, errno(err)
	}
	return &aliveHandle{f: f}, fuse.FOPEN_DIRECT_IO, 0
}

// aliveHandle is one open of an alive file.
type aliveHandle struct{ f *aliveFile }

var (
	_ = (fusefs.FileReleaser)((*aliveHandle)(nil))
	_ = (fusefs.FileReader)((*aliveHandle)(nil))
)

func (h *aliveHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(nil), 0
}

func (h *aliveHandle) Release(ctx context.Context) syscall.Errno {
	h.f.fs.store.RankClosed(h.f.name)
	return 0
}
