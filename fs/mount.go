package fs

import (
	"bufio"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/tsock/tsock/batchstore"
)

// Options configure a mount.
type Options struct {
	// Status renders MOUNTPOINT/status.
	Status func() ([]byte, error)
	// State renders MOUNTPOINT/state: the producer's state as one word.
	State func() ([]byte, error)
	// Metrics renders MOUNTPOINT/metrics (Prometheus text format).
	Metrics func() ([]byte, error)
	// StatusJSON renders MOUNTPOINT/status.json: status for programs.
	StatusJSON func() ([]byte, error)
	// ParseSubset reads what a consumer's subset file is given (see
	// batchstore.ParseSubset); nil: writes to it fail with EINVAL.
	ParseSubset func(text []byte) (*batchstore.Subset, error)
	// SubsetBytes is the most a subset of this mount's dataset can take
	// written (every index once, as text or int64s); a longer one is
	// refused at the write that passes it. nil: maxSubsetBytes.
	SubsetBytes func() int64
	// Classes renders MOUNTPOINT/classes: one class name a line, in
	// label order; nil where the classes are not known (ingest).
	Classes func() ([]byte, error)
	// Passthrough asks for FUSE passthrough; it is used only if the
	// kernel accepts a probe registration after mounting.
	Passthrough bool
	// Backing describes the blobs' storage, for DataPath.
	Backing string
	// ProbeFd is a file of the blobs' kind to probe passthrough with.
	ProbeFd int
	// Compose assembles consumers' re-batched files.
	Compose Composer
	// CUDA, if set, serves consumers/NAME/NNNNNN.cuda beside each batch.
	CUDA CUDAFiles
	// GPU are the files of MOUNTPOINT/gpu/ (name → content), if any.
	GPU map[string]func() ([]byte, error)
	// Ingest, if set, serves MOUNTPOINT/ingest/ (--ingest).
	Ingest Ingest
	// Debug logs every FUSE request.
	Debug bool
	// Serving, if set, is called with the mount before anything is
	// served: the caller's handlers may rely on what it sets there.
	Serving func(*Mounted)
	// AllowOther lets users other than the mount's owner in (allow_other).
	// The kernel then checks every access against the modes tsock gives:
	// each consumer directory belongs to the user who made it.
	AllowOther bool
}

// mountOwner is the user the daemon runs as: it owns everything but the
// consumer directories (and their batch_size files).
func mountOwner() (uid, gid uint32) { return uint32(os.Geteuid()), uint32(os.Getegid()) }

// Mounted is a live mount.
type Mounted struct {
	Dir    string
	server *fuse.Server
	fs     *fileSystem
}

// Mount serves store at dir. dir must exist and not be a mount point.
func Mount(dir string, store *batchstore.Store, opts Options) (*Mounted, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := checkMountpoint(dir); err != nil {
		return nil, err
	}
	if err := checkDevFuse(); err != nil {
		return nil, err
	}
	fsys := newFileSystem(store, opts)
	mo := fuse.MountOptions{
		FsName: "tsock", Name: "tsock",
		// Replies from a batch's file are spliced (batchHandle.Read);
		// every other reply is one writev (bytesReply).
		DirectMount: true, MaxWrite: requestSize,
		AllowOther: opts.AllowOther, Debug: opts.Debug,
		// The kernel checks permissions against the modes and owners
		// tsock reports, as on any file system.
		Options:       []string{"default_permissions"},
		MaxBackground: 64,
	}
	if opts.Debug {
		mo.Logger = log.New(os.Stderr, "fuse: ", 0)
	} else {
		mo.Logger = log.New(fuseLog{fsys.path}, "", 0)
	}
	nodeOpts := fsys.nodeOptions()
	nodeOpts.MountOptions = mo
	server, err := fusefs.Mount(dir, fsys.root, nodeOpts)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	fsys.listen()
	m := &Mounted{Dir: dir, server: server, fs: fsys}
	fsys.path.wanted, fsys.path.reason = m.probePassthrough(opts)
	if fsys.path.wanted { // the window serves the reads the kernel does not pass through
		if _, err := readahead(dir, requestSize); err != nil {
			slog.Warn("could not raise readahead; reads the kernel refuses to pass through will be slower", "err", err)
		}
	} else { // a user's mount keeps the kernel's window: no warning
		fsys.path.window, _ = readahead(dir, max(fsys.path.spliceMax, kernelWindow))
		fsys.fill = newFiller(dir, fsys.path.window)
	}
	if opts.Serving != nil {
		opts.Serving(m)
	}
	close(fsys.ready)
	return m, nil
}

// newFileSystem is the node tree over store, not yet served: Mount hands
// it to the kernel, NewNodeFS (tests) answers requests in process.
func newFileSystem(store *batchstore.Store, opts Options) *fileSystem {
	fsys := &fileSystem{store: store, opts: opts, path: &dataPath{backing: opts.Backing, spliceMax: spliceLimit()},
		ready: make(chan struct{})}
	fsys.root = &root{fs: fsys}
	return fsys
}

// nodeOptions are go-fuse's node options: entry timeouts zero, so that
// every open follows a lookup from its thread (an open is charged to the
// consumer whose directory that lookup named).
func (fsys *fileSystem) nodeOptions() *fusefs.Options {
	zero, attr := time.Duration(0), time.Second
	return &fusefs.Options{EntryTimeout: &zero, NegativeTimeout: &zero, AttrTimeout: &attr}
}

// listen has the store push its frees to the forgetter, once the tree is
// served (its root inode is initialised then).
func (fsys *fileSystem) listen() {
	fsys.forget = newForgetter(fsys.root.EmbeddedInode(), fsys.store.Holds)
	fsys.store.SetInvalidator(fsys.forget)
}

// BatchInodes is how many batch files' inodes the kernel holds now, over
// every consumer directory. Each costs daemon memory until the kernel
// forgets it.
func (m *Mounted) BatchInodes() int {
	inodes := map[*fusefs.Inode]bool{}
	if consumers := m.fs.root.GetChild("consumers"); consumers != nil {
		for _, dir := range consumers.Children() {
			for name, child := range dir.Children() {
				if !controlNames[name] {
					inodes[child] = true
				}
			}
		}
	}
	if fill := m.fs.root.GetChild(fillDirName); fill != nil {
		for _, child := range fill.Children() {
			inodes[child] = true
		}
	}
	return len(inodes)
}

// PrunesInodes says whether the kernel forgets released batch files when
// asked (NOTIFY_PRUNE, Linux 6.16+); without it they stay until memory
// pressure.
func (m *Mounted) PrunesInodes() bool { return m.fs.forget.supported() }

// Wait blocks until the file system is unmounted, by Unmount or umount(8).
func (m *Mounted) Wait() { m.server.Wait() }

// Unmount unmounts, unless umount(8) already did; readers still blocked
// in a lookup get an error. Shut the store down first.
func (m *Mounted) Unmount() error {
	// First the forgetter: a notify waits for its directory's lock, which
	// a pending lookup holds; with the store shut down (callers do that
	// first) lookups return at once, and no notify may race the unmount.
	// The store tells it of frees no more.
	m.fs.store.SetInvalidator(nil)
	m.fs.forget.close()
	// The filler before the unmount: a batch it has open makes it busy.
	m.fs.fill.close()
	// The invalidations under way end once the kernel has answered, or the
	// mount is gone: waited for, whatever way the unmount goes.
	defer m.fs.notifies.Wait()
	if still, err := isMountPoint(m.Dir); err == nil && !still {
		return nil
	}
	err := m.server.Unmount()
	if err != nil {
		// A busy mount (a shell cd'ed into it) still goes away lazily.
		if lerr := unix.Unmount(m.Dir, unix.MNT_DETACH); lerr == nil {
			return nil
		}
		return fmt.Errorf("unmount %s: %w", m.Dir, err)
	}
	return nil
}

// checkMountpoint refuses a missing directory, a file, and a directory
// that already has something mounted on it (a stale FUSE mount included).
// CheckMountable says, before anything slow (indexing a dataset), why a
// mount at dir would fail: the mountpoint, or /dev/fuse for a user
// without root.
func CheckMountable(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := checkMountpoint(dir); err != nil {
		return err
	}
	return checkDevFuse()
}

// checkDevFuse: a user without root mounts through fusermount3, which
// must open /dev/fuse as that user. Its own failure is an exit code; this
// says what to change.
func checkDevFuse() error {
	if os.Geteuid() == 0 {
		return nil
	}
	if err := unix.Access("/dev/fuse", unix.R_OK|unix.W_OK); err != nil {
		return fmt.Errorf("/dev/fuse is not openable by uid %d (%v): without root, tsock mounts only where /dev/fuse is (most distributions ship it mode 0666; an administrator's `chmod 0666 /dev/fuse` does it)", os.Geteuid(), err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		if _, err2 := exec.LookPath("fusermount"); err2 != nil {
			return fmt.Errorf("without root, tsock mounts through fusermount3 (Debian's fuse3), which is not on the PATH: %w", err)
		}
	}
	return nil
}

func checkMountpoint(dir string) error {
	// Never through a link: one planted in a shared directory (/dev/shm,
	// /tmp) would have a daemon running as root mount over its target.
	if lst, err := os.Lstat(dir); err == nil && lst.Mode()&os.ModeSymlink != 0 {
		target, _ := os.Readlink(dir)
		return fmt.Errorf("mountpoint %s: a symbolic link (to %s): tsock never mounts through a link; give the directory itself", dir, target)
	}
	st, err := os.Stat(dir)
	if err != nil {
		if pe, ok := err.(*os.PathError); ok && pe.Err == syscall.ENOTCONN {
			return fmt.Errorf("mountpoint %s: a dead FUSE mount is still there; run: umount -l %s", dir, dir)
		}
		return fmt.Errorf("mountpoint %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("mountpoint %s: not a directory", dir)
	}
	mounted, err := isMountPoint(dir)
	if err != nil {
		return err
	}
	if mounted {
		return fmt.Errorf("mountpoint %s: already mounted (umount it first)", dir)
	}
	return nil
}

func isMountPoint(dir string) (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountPath(fields[4]) == dir {
			return true, nil
		}
	}
	return false, sc.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for space).
func unescapeMountPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
