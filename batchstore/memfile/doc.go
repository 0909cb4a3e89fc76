// Package memfile allocates the memory-backed files that hold published
// batches: one file per batch, written once through a shared mapping,
// then only read (by the kernel through FUSE passthrough, or by the daemon).
//
// Two backings: an anonymous memfd, which works everywhere, and unnamed
// O_TMPFILE files on a tmpfs that tsock mounts itself (huge=advise):
// batches the daemon writes through a mapping get huge pages, which
// passthrough reads at page-cache speed; batches an outside producer
// writes get 4 KiB pages, which are faster to allocate where the
// hypervisor takes freed huge pages back. The
// tmpfs is detached from its path the moment it is mounted and lives on
// through a descriptor of its root. Without root the same tmpfs is
// mounted in a user namespace of the daemon's own (NewUserTmpfs, by a
// helper process: the daemon's threads keep it out of new user
// namespaces), where unprivileged user namespaces are on; its files are
// then the user's, whose other processes may read them through
// /proc/PID/fd at memory speed, around FUSE. Either way the memory is freed when
// the last descriptor closes, so a crashed daemon leaves nothing behind:
// no file, no mount.
//
// What crosses its border: in, sizes to allocate; out, Files (a
// descriptor, a shared mapping to write once, Free) that batchstore
// publishes as Blobs and fs hands the kernel for passthrough. It knows
// nothing of batches' contents.
package memfile
