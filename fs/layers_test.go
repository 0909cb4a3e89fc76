package fs_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/fs"
)

// tree is what a test does to the file system, by paths relative to its
// root: the same suite runs through a real mount (osTree, the kernel in
// between) and over the node layer in process (nodeTree, no kernel, no
// root, no /dev/fuse), as rclone's vfstest runs one suite over its VFS
// and its mount. Errors are the errnos a program would see.
type tree interface {
	ReadFile(path string) ([]byte, error)
	WriteFile(path string, data []byte) error
	Mkdir(path string) error
	Rmdir(path string) error
	Remove(path string) error
	ReadDir(path string) ([]string, error)
	Size(path string) (int64, error)
}

// layers runs test once over the node layer in process and once through
// a real mount (the daemon serving reads, as for a user without root).
func layers(t *testing.T, test func(t *testing.T, e *env, tr tree)) {
	t.Run("node", func(t *testing.T) {
		e := nodeEnv(t)
		test(t, e, e.tr)
	})
	t.Run("mount", func(t *testing.T) {
		e := mount(t, false)
		test(t, e, osTree(e.dir))
	})
}

// osTree is a mounted tree, through the kernel.
type osTree string

func (o osTree) p(path string) string { return filepath.Join(string(o), path) }

func (o osTree) ReadFile(path string) ([]byte, error) { return os.ReadFile(o.p(path)) }
func (o osTree) WriteFile(path string, data []byte) error {
	return os.WriteFile(o.p(path), data, 0o644)
}
func (o osTree) Mkdir(path string) error  { return os.Mkdir(o.p(path), 0o755) }
func (o osTree) Rmdir(path string) error  { return syscall.Rmdir(o.p(path)) }
func (o osTree) Remove(path string) error { return syscall.Unlink(o.p(path)) }
func (o osTree) ReadDir(path string) ([]string, error) {
	entries, err := os.ReadDir(o.p(path))
	var names []string
	for _, de := range entries {
		names = append(names, de.Name())
	}
	sort.Strings(names)
	return names, err
}
func (o osTree) Size(path string) (int64, error) {
	st, err := os.Stat(o.p(path))
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// nodeEnv is a store served by the node layer in process.
func nodeEnv(t *testing.T, with ...func(*fs.Options)) *env {
	e := &env{t: t, store: batchstore.New(batchstore.Config{Limit: 64 << 20, SizeOf: func(n int) int64 { return int64(n) * contentSize }}), alloc: memfile.NewMemFD()}
	opts := fs.Options{
		Status:  func() ([]byte, error) { return []byte("ok\n"), nil },
		Backing: "memfd", Compose: concat,
	}
	for _, f := range with {
		f(&opts)
	}
	raw, stop := fs.NewNodeFS(e.store, opts)
	t.Cleanup(func() {
		e.store.Shutdown()
		stop()
		e.store.Close()
	})
	e.tr = &nodeTree{raw: raw, caller: fuse.Caller{Owner: fuse.Owner{Uid: uint32(os.Geteuid()), Gid: uint32(os.Getegid())}, Pid: uint32(os.Getpid())}}
	return e
}

// nodeTree makes the requests the kernel would make for each call, one
// thread's (Caller.Pid: a lookup and the open after it come from the same
// thread, as the store's charging of opens expects).
type nodeTree struct {
	raw    fuse.RawFileSystem
	caller fuse.Caller
}

func (n *nodeTree) in(node uint64) fuse.InHeader {
	return fuse.InHeader{NodeId: node, Caller: n.caller}
}

func errnoOf(st fuse.Status) error {
	if st == fuse.OK {
		return nil
	}
	return syscall.Errno(st)
}

// walk looks up each component of path from the root (node 1).
func (n *nodeTree) walk(path string) (uint64, error) {
	node := uint64(fuse.FUSE_ROOT_ID)
	for _, name := range strings.Split(path, "/") {
		if name == "" || name == "." {
			continue
		}
		h := n.in(node)
		var out fuse.EntryOut
		if st := n.raw.Lookup(nil, &h, name, &out); st != fuse.OK {
			return 0, errnoOf(st)
		}
		if out.NodeId == 0 { // a negative entry
			return 0, syscall.ENOENT
		}
		node = out.NodeId
	}
	return node, nil
}

func (n *nodeTree) parent(path string) (uint64, string, error) {
	dir, name := filepath.Split(path)
	node, err := n.walk(dir)
	return node, name, err
}

func (n *nodeTree) ReadFile(path string) ([]byte, error) {
	node, err := n.walk(path)
	if err != nil {
		return nil, err
	}
	var open fuse.OpenOut
	if st := n.raw.Open(nil, &fuse.OpenIn{InHeader: n.in(node), Flags: uint32(os.O_RDONLY)}, &open); st != fuse.OK {
		return nil, errnoOf(st)
	}
	defer n.raw.Release(nil, &fuse.ReleaseIn{InHeader: n.in(node), Fh: open.Fh})
	var data []byte
	buf := make([]byte, 128<<10)
	for {
		res, st := n.raw.Read(nil, &fuse.ReadIn{InHeader: n.in(node), Fh: open.Fh, Offset: uint64(len(data)), Size: uint32(len(buf))}, buf)
		if st != fuse.OK {
			return data, errnoOf(st)
		}
		b, st := replyBytes(res, buf)
		res.Done()
		if st != fuse.OK {
			return data, errnoOf(st)
		}
		if len(b) == 0 {
			return data, nil
		}
		data = append(data, b...)
	}
}

// WriteFile opens an existing file for writing (truncating), or creates
// one, writes, flushes and releases: a control file rules at its close.
func (n *nodeTree) WriteFile(path string, data []byte) error {
	dir, name, err := n.parent(path)
	if err != nil {
		return err
	}
	var fh, node uint64
	if node, err = n.walk(path); err == nil {
		var open fuse.OpenOut
		if st := n.raw.Open(nil, &fuse.OpenIn{InHeader: n.in(node), Flags: uint32(os.O_WRONLY | os.O_TRUNC)}, &open); st != fuse.OK {
			return errnoOf(st)
		}
		fh = open.Fh
	} else if errors.Is(err, syscall.ENOENT) {
		var out fuse.CreateOut
		if st := n.raw.Create(nil, &fuse.CreateIn{InHeader: n.in(dir), Flags: uint32(os.O_WRONLY | os.O_CREATE | os.O_TRUNC), Mode: 0o644}, name, &out); st != fuse.OK {
			return errnoOf(st)
		}
		node, fh = out.NodeId, out.Fh
	} else {
		return err
	}
	var werr error
	if len(data) > 0 {
		if _, st := n.raw.Write(nil, &fuse.WriteIn{InHeader: n.in(node), Fh: fh, Size: uint32(len(data))}, data); st != fuse.OK {
			werr = errnoOf(st)
		}
	}
	if st := n.raw.Flush(nil, &fuse.FlushIn{InHeader: n.in(node), Fh: fh}); st != fuse.OK && werr == nil {
		werr = errnoOf(st)
	}
	n.raw.Release(nil, &fuse.ReleaseIn{InHeader: n.in(node), Fh: fh})
	return werr
}

// WritePieces opens path for writing and sends pieces as WRITE requests
// in the order given (each at its own offset), as the kernel may send the
// requests one write(2) was split into, then flushes and releases: the
// errors of the writes, and of the close.
func (n *nodeTree) WritePieces(path string, pieces []piece) (writes []error, closed error) {
	node, err := n.walk(path)
	if err != nil {
		return nil, err
	}
	var open fuse.OpenOut
	if st := n.raw.Open(nil, &fuse.OpenIn{InHeader: n.in(node), Flags: uint32(os.O_WRONLY)}, &open); st != fuse.OK {
		return nil, errnoOf(st)
	}
	for _, p := range pieces {
		_, st := n.raw.Write(nil, &fuse.WriteIn{InHeader: n.in(node), Fh: open.Fh, Offset: uint64(p.off), Size: uint32(len(p.data))}, p.data)
		writes = append(writes, errnoOf(st))
	}
	closed = errnoOf(n.raw.Flush(nil, &fuse.FlushIn{InHeader: n.in(node), Fh: open.Fh}))
	n.raw.Release(nil, &fuse.ReleaseIn{InHeader: n.in(node), Fh: open.Fh})
	return writes, closed
}

// piece is bytes written at an offset.
type piece struct {
	off  int64
	data []byte
}

func (n *nodeTree) Mkdir(path string) error {
	dir, name, err := n.parent(path)
	if err != nil {
		return err
	}
	var out fuse.EntryOut
	return errnoOf(n.raw.Mkdir(nil, &fuse.MkdirIn{InHeader: n.in(dir), Mode: 0o755}, name, &out))
}

// replyBytes is what the kernel receives of a reply: go-fuse splices a
// reply that says where its bytes lie (Seekable) from that file, as read
// here, and asks the others for their bytes.
func replyBytes(res fuse.ReadResult, buf []byte) ([]byte, fuse.Status) {
	seekable, ok := res.(interface{ Seekable() (uintptr, int64, int) })
	if !ok {
		return res.Bytes(buf)
	}
	fd, off, size := seekable.Seekable()
	k, err := syscall.Pread(int(fd), buf[:min(size, len(buf))], off)
	if err != nil {
		return nil, fuse.ToStatus(err)
	}
	return buf[:k], fuse.OK
}

// entry resolves path's parent and, as the kernel does before an unlink
// or rmdir, looks the name itself up.
func (n *nodeTree) entry(path string) (uint64, string, error) {
	dir, name, err := n.parent(path)
	if err != nil {
		return 0, "", err
	}
	_, err = n.walk(path)
	return dir, name, err
}

func (n *nodeTree) Rmdir(path string) error {
	dir, name, err := n.entry(path)
	if err != nil {
		return err
	}
	h := n.in(dir)
	return errnoOf(n.raw.Rmdir(nil, &h, name))
}

func (n *nodeTree) Remove(path string) error {
	dir, name, err := n.entry(path)
	if err != nil {
		return err
	}
	h := n.in(dir)
	return errnoOf(n.raw.Unlink(nil, &h, name))
}

// ReadDir reads the directory's entries as the kernel does, in as many
// READDIR requests as they take, and parses the dirents go-fuse wrote.
func (n *nodeTree) ReadDir(path string) ([]string, error) {
	node, err := n.walk(path)
	if err != nil {
		return nil, err
	}
	var open fuse.OpenOut
	if st := n.raw.OpenDir(nil, &fuse.OpenIn{InHeader: n.in(node)}, &open); st != fuse.OK {
		return nil, errnoOf(st)
	}
	defer n.raw.ReleaseDir(&fuse.ReleaseIn{InHeader: n.in(node), Fh: open.Fh})
	var names []string
	for off := uint64(0); ; {
		buf := make([]byte, 4096)
		if st := n.raw.ReadDir(nil, &fuse.ReadIn{InHeader: n.in(node), Fh: open.Fh, Offset: off, Size: uint32(len(buf))}, fuse.NewDirEntryList(buf, off)); st != fuse.OK {
			return nil, errnoOf(st)
		}
		got := 0
		for b := buf; len(b) >= 24; got++ {
			next, nameLen := binary.LittleEndian.Uint64(b[8:]), int(binary.LittleEndian.Uint32(b[16:]))
			if nameLen == 0 {
				break
			}
			if name := string(b[24 : 24+nameLen]); name != "." && name != ".." {
				names = append(names, name)
			}
			off = next
			b = b[(24+nameLen+7)&^7:]
		}
		if got == 0 {
			sort.Strings(names)
			return names, nil
		}
	}
}

func (n *nodeTree) Size(path string) (int64, error) {
	node, err := n.walk(path)
	if err != nil {
		return 0, err
	}
	var out fuse.AttrOut
	if st := n.raw.GetAttr(nil, &fuse.GetAttrIn{InHeader: n.in(node)}, &out); st != fuse.OK {
		return 0, errnoOf(st)
	}
	return int64(out.Size), nil
}
