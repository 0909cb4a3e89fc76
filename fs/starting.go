package fs

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Starting is the mount a daemon shows while it lists or indexes its
// source, before the store exists: MOUNTPOINT/starting alone, saying what
// it is doing and how far it got, so that a listing of a million files or
// an index pass over a bucket is seen, not a silent empty directory. It
// has neither status nor status.json: programs (readiness probes, the
// Slurm recipe, scripts) wait for those, which only the real mount
// serves. Unmount it before the real mount.
type Starting struct {
	dir    string
	server *fuse.Server
}

// startingRoot holds the one file.
type startingRoot struct {
	fusefs.Inode
	status func() ([]byte, error)
}

var _ = (fusefs.NodeOnAdder)((*startingRoot)(nil))

func (r *startingRoot) OnAdd(ctx context.Context) {
	r.AddChild("starting", r.NewPersistentInode(ctx, &textFile{render: r.status}, fusefs.StableAttr{Mode: syscall.S_IFREG}), false)
}

// MountStarting serves status at dir until Unmount. dir must be
// mountable (CheckMountable).
func MountStarting(dir string, status func() ([]byte, error), allowOther bool) (*Starting, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := checkMountpoint(dir); err != nil {
		return nil, err
	}
	mo := fuse.MountOptions{FsName: "tsock", Name: "tsock", DirectMount: true, AllowOther: allowOther,
		Options: []string{"default_permissions"}}
	server, err := fusefs.Mount(dir, &startingRoot{status: status}, &fusefs.Options{MountOptions: mo})
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	return &Starting{dir: dir, server: server}, nil
}

// Unmount takes the starting mount away (lazily where something holds
// it: a shell cd'ed into it), so that the real mount finds the
// mountpoint free.
func (s *Starting) Unmount() error {
	if err := s.server.Unmount(); err != nil {
		if lerr := unix.Unmount(s.dir, unix.MNT_DETACH); lerr != nil {
			return fmt.Errorf("unmount %s: %w", s.dir, err)
		}
	}
	s.server.Wait()
	return nil
}
