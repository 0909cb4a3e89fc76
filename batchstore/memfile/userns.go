package memfile

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// HelperArg, as a program's first argument, makes it the user-namespace
// tmpfs helper (RunHelper): a program that calls NewUserTmpfs must call
// RunHelper at its start when it sees it.
const HelperArg = "__tsock-userns-tmpfs"

// NewUserTmpfs is NewTmpfs for a user without CAP_SYS_ADMIN: the tmpfs is
// mounted in a user and mount namespace of its own (unprivileged user
// namespaces: Debian's default; off where a distribution or a cluster
// turns them off, and then it fails), by a helper process, self run with
// HelperArg (a Go process cannot enter a new user namespace itself: it
// has threads). The helper mounts it on a temporary directory of
// parent, detaches it and hands its root's descriptor back over a socket;
// then it exits, and its namespaces live on only through that descriptor
// and the files made under it. So no path leads to the tmpfs, nothing is
// left mounted however the daemon ends, and its files' pages are huge
// where written through a mapping, as root's. The files are the daemon
// user's own: another process of that user may open them through
// /proc/PID/fd (the data path around FUSE); another user may not.
func NewUserTmpfs(self, parent string) (*Allocator, error) {
	dir, err := os.MkdirTemp(parent, "tsock-batches-")
	if err != nil {
		return nil, fmt.Errorf("user namespace tmpfs: %w", err)
	}
	defer os.Remove(dir)
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("user namespace tmpfs: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "tmpfs-helper"), os.NewFile(uintptr(pair[1]), "tmpfs-helper")
	defer ours.Close()
	cmd := exec.Command(self, HelperArg, dir)
	cmd.ExtraFiles = []*os.File{theirs} // fd 3
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		// setgroups denied: what an unprivileged gid map requires.
		GidMappingsEnableSetgroups: false,
	}
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		return nil, fmt.Errorf("user namespace tmpfs: start the helper (user namespaces off?): %w", err)
	}
	fd, recvErr := recvFd(int(ours.Fd()))
	if err := cmd.Wait(); err != nil && recvErr == nil {
		unix.Close(fd)
		recvErr = fmt.Errorf("the helper: %w", err)
	}
	if recvErr != nil {
		return nil, fmt.Errorf("user namespace tmpfs: %w", recvErr)
	}
	a := newAllocator(Tmpfs, fd)
	a.userns = true
	return a, nil
}

// RunHelper is the helper's whole life (os.Args[1] == HelperArg): in its
// own user and mount namespaces, as their root, it mounts the tmpfs on
// dir detached (mountDetached, as root's), sends its root's descriptor
// on fd 3 and returns the exit code.
func RunHelper(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "tsock: tmpfs helper: want one directory")
		return 2
	}
	if err := helper(args[0]); err != nil {
		fmt.Fprintf(os.Stderr, "tsock: tmpfs helper: %v\n", err)
		return 1
	}
	return 0
}

func helper(dir string) error {
	fd, err := mountDetached(dir)
	if err != nil {
		return err
	}
	return unix.Sendmsg(3, []byte{0}, unix.UnixRights(fd), nil, 0)
}

// recvFd receives one descriptor on sock.
func recvFd(sock int) (int, error) {
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(sock, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("receive the tmpfs root: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, errors.New("receive the tmpfs root: the helper sent none (it said why above)")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, fmt.Errorf("receive the tmpfs root: %d descriptors, %v", len(fds), err)
	}
	return fds[0], nil
}
