package fs

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tsock/tsock/batchstore"
)

// batchSuffix ends every batch file name; cudaSuffix every batch's CUDA
// control file (GPU mode).
const (
	batchSuffix = ".safetensors"
	cudaSuffix  = ".cuda"
)

// BatchName is the file name of a consumer's batch number local.
func BatchName(local uint64) string { return fmt.Sprintf("%06d%s", local, batchSuffix) }

// CUDAName is the name of the CUDA control file of batch number local.
func CUDAName(local uint64) string { return fmt.Sprintf("%06d%s", local, cudaSuffix) }

// parseBatchName inverts BatchName and CUDAName; names they would not
// produce are refused, so that every file has exactly one name.
func parseBatchName(name string) (local uint64, cuda bool, ok bool) {
	digits, ok := strings.CutSuffix(name, batchSuffix)
	if !ok {
		digits, cuda = strings.CutSuffix(name, cudaSuffix)
		if !cuda {
			return 0, false, false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || len(digits) < 6 || fmt.Sprintf("%06d", n) != digits {
		return 0, false, false
	}
	return n, cuda, true
}

// controlNames are the files of a consumer directory that are not
// batches; rankControlNames those of a rank's (consumers/GROUP/R).
var (
	controlNames     = map[string]bool{"status": true, "state": true, "batch_size": true, "subset": true, "world": true, "drop_last": true, "read_ahead": true}
	rankControlNames = map[string]bool{"status": true, "state": true, "alive": true}
)

// consumerDir is consumers/NAME. It belongs to the user who made it: only
// that user (and root) may list it, read its batches, set its batch size
// or remove it. Others could otherwise consume a trial's batches for it.
type consumerDir struct {
	readOnlyDir
	fs       *fileSystem
	name     string // the store's: NAME, or GROUP/R for a rank
	uid, gid uint32
	controls map[string]bool // its files that are not batches
}

var (
	_ = (fusefs.NodeOnAdder)((*consumerDir)(nil))
	_ = (fusefs.NodeLookuper)((*consumerDir)(nil))
	_ = (fusefs.NodeReaddirer)((*consumerDir)(nil))
	_ = (fusefs.NodeUnlinker)((*consumerDir)(nil))
	_ = (fusefs.NodeGetattrer)((*consumerDir)(nil))
	_ = (fusefs.NodeMkdirer)((*consumerDir)(nil))
	_ = (fusefs.NodeRmdirer)((*consumerDir)(nil))
)

func (d *consumerDir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fillAttr(&out.Attr)
	return 0
}

func (d *consumerDir) fillAttr(attr *fuse.Attr) {
	attr.Mode = syscall.S_IFDIR | 0o700
	attr.Uid, attr.Gid = d.uid, d.gid
}

func (d *consumerDir) OnAdd(ctx context.Context) {
	for name, render := range map[string]func(batchstore.ConsumerSnapshot) string{
		"status": batchstore.ConsumerSnapshot.Text,
		"state":  func(snap batchstore.ConsumerSnapshot) string { return snap.State() + "\n" },
	} {
		file := &textFile{render: func() ([]byte, error) {
			snap, err := d.fs.store.ConsumerSnapshot(d.name)
			if err != nil {
				return nil, err
			}
			return []byte(render(snap)), nil
		}}
		d.AddChild(name, d.NewPersistentInode(ctx, file, fusefs.StableAttr{Mode: syscall.S_IFREG}), false)
	}
	if d.controls["alive"] { // a rank's
		alive := &aliveFile{fs: d.fs, name: d.name, uid: d.uid, gid: d.gid}
		d.AddChild("alive", d.NewPersistentInode(ctx, alive, fusefs.StableAttr{Mode: syscall.S_IFREG}), false)
		return
	}
	for name, f := range map[string]*controlFile{"batch_size": d.batchSizeFile(), "world": d.worldFile(), "drop_last": d.dropLastFile(),
		"read_ahead": d.readAheadFile()} {
		f.uid, f.gid = d.uid, d.gid // its owner may write it
		d.AddChild(name, d.NewPersistentInode(ctx, f, fusefs.StableAttr{Mode: syscall.S_IFREG}), false)
	}
	subset := d.subsetFile()
	subset.uid, subset.gid = d.uid, d.gid
	d.AddChild("subset", d.NewPersistentInode(ctx, subset, fusefs.StableAttr{Mode: syscall.S_IFREG}), false)
}

// callerID is the kernel thread that made the request.
func callerID(ctx context.Context) batchstore.CallerID {
	if c, ok := fuse.FromContext(ctx); ok {
		return batchstore.CallerID(c.Pid)
	}
	return 0
}

// Lookup blocks until the batch is published.
func (d *consumerDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if _, ok := parseRank(name); ok {
		return d.lookupRank(name, out)
	}
	if d.controls[name] {
		child := d.GetChild(name)
		child.Operations().(interface {
			fillAttr(*fuse.Attr) syscall.Errno
		}).fillAttr(&out.Attr)
		return child, 0
	}
	local, cuda, ok := parseBatchName(name)
	if !ok || (cuda && d.fs.opts.CUDA == nil) {
		return nil, syscall.ENOENT
	}
	ref, err := d.fs.store.Lookup(ctx, d.name, local, callerID(ctx))
	if err != nil {
		return nil, errno(err)
	}
	if cuda {
		return d.newCUDAInode(ctx, ref, out)
	}
	return d.newBatchInode(ctx, ref, out), 0
}

func (d *consumerDir) Readdir(ctx context.Context) (fusefs.DirStream, syscall.Errno) {
	refs, err := d.fs.store.Pending(d.name)
	if err != nil {
		return nil, errno(err)
	}
	var entries []fuse.DirEntry
	for name := range d.controls {
		entries = append(entries, fuse.DirEntry{Name: name, Mode: syscall.S_IFREG})
	}
	slices.SortFunc(entries, func(a, b fuse.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	entries = append(entries, d.rankEntries()...)
	for _, ref := range refs {
		ino := batchIno(ref.Seq)
		if !ref.Direct {
			ino = rebatchedIno(ref.Consumer, ref.Local)
		}
		entries = append(entries, fuse.DirEntry{Name: BatchName(ref.Local), Mode: syscall.S_IFREG, Ino: ino})
		if d.fs.opts.CUDA != nil {
			entries = append(entries, fuse.DirEntry{Name: CUDAName(ref.Local), Mode: syscall.S_IFREG, Ino: cudaIno(ref.Consumer, ref.Local)})
		}
	}
	return fusefs.NewListDirStream(entries), 0
}

// Unlink gives a batch up without reading it (by either of its names).
func (d *consumerDir) Unlink(ctx context.Context, name string) syscall.Errno {
	local, cuda, ok := parseBatchName(name)
	if !ok || (cuda && d.fs.opts.CUDA == nil) {
		if d.controls[name] {
			return syscall.EPERM
		}
		return syscall.ENOENT
	}
	return errno(d.fs.store.Unlink(d.name, local))
}
