package fs

import (
	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tsock/tsock/batchstore"
)

// NewNodeFS serves store in process, with no kernel: go-fuse's node
// layer answers the raw FUSE requests a test makes (fs_test's nodeTree),
// as the kernel would make them, so that one suite runs over the node
// layer and through a real mount (as rclone's vfstest runs one suite over
// the VFS and the mount). The daemon serves reads (no passthrough), with
// no filler (it reads through a mount) and no kernel to notify (go-fuse
// answers ENOSYS to the forgetter's prunes, which it takes as a kernel
// without them). stop stops the forgetter.
func NewNodeFS(store *batchstore.Store, opts Options) (raw fuse.RawFileSystem, stop func()) {
	opts.Passthrough = false
	fsys := newFileSystem(store, opts)
	raw = fusefs.NewNodeFS(fsys.root, fsys.nodeOptions())
	fsys.listen()
	close(fsys.ready)
	return raw, func() {
		store.SetInvalidator(nil)
		fsys.forget.close()
	}
}

// Spliced is how many of the bytes Served counts were spliced from the
// batches' files.
func (m *Mounted) Spliced() uint64 { return m.fs.path.splicedBytes.Load() }

// ReadAhead is how many batches the filler has read ahead whole, and how
// many it could not (those freed before it got to them aside).
func (m *Mounted) ReadAhead() (filled, failed uint64) { return m.fs.fill.counts() }
