// Package fs is the mount: a go-fuse adapter over batchstore, and the
// data path by which a batch's bytes reach a reader. It decides nothing
// of what a consumer reads (the store does: every answer comes from it,
// and every store error maps to one errno in errno()), but it owns how
// the bytes get there (datapath.go: passthrough or the daemon's reads,
// the splice policy, the readahead window; fill.go: the filler that reads
// each batch ahead once; forget.go: the forgetter, which has the kernel
// drop released batches when the store says it freed them). Its state is
// that: the nodes the kernel knows, the data path's counts, the filler's
// queue and the forgetter's parked files.
//
// The tree:
//
//	status                          the daemon's state, for people
//	state                           the producer's state, one word, for programs
//	consumers/                      mkdir NAME joins, rmdir NAME leaves (mode 1777)
//	consumers/NAME/status           one consumer's state (NAME: mode 0700, its maker's)
//	consumers/NAME/state            the same, one word
//	consumers/NAME/000042.safetensors  that consumer's batch 42
//	consumers/NAME/batch_size, subset   its own batch size and data (control files)
//	consumers/NAME/read_ahead       1, or 0 where its reader reads around FUSE (control file)
//	ingest/next, order, skip, samples   an outside producer's side (--ingest)
//	ingest/status, refusal          its state for people; the last refusal, one line
//
// Invariants:
//   - A Lookup of a batch that is not published yet blocks in the store
//     until it is; a signal interrupts it (EINTR). Nothing blocks in Read.
//   - A batch has one inode (Ino = batchInoBase + its global sequence
//     number) under every consumer directory it appears in, so the kernel
//     keeps one page cache for it.
//   - Entry timeouts are zero, so every open is preceded by a LOOKUP from
//     the same thread: the store uses that to charge the open to the
//     consumer whose directory was named.
//   - Opens are served by FUSE passthrough from the batch's memory-backed
//     file when the kernel allows it (probed at mount); otherwise the
//     daemon serves reads with FOPEN_KEEP_CACHE, and its filler (fill.go)
//     reads each batch ahead into the page cache once a consumer has
//     looked it up, through .fill/SEQ: a hidden directory only the
//     filler's thread may look into, whose opens hold the batch
//     (Store.Hold) without charging or consuming anything.
//   - Without passthrough, a producer batch's file answers the extended
//     attribute user.tsock.direct (DirectXattr) once opened: where its
//     bytes lie in the daemon's own memory-backed file, /proc/PID/fd/N
//     and its inode. A reader of the daemon's user that holds the batch
//     open in the mount (the lease) may map that path and read at memory
//     speed around FUSE; /proc refuses it to other users. The filler
//     skips consumers that said so (read_ahead 0).
//   - A reply from a producer batch is spliced from its file, up to what
//     a pipe holds (spliceLimit); every other reply is one writev
//     (bytesReply). The data path's invariants are datapath.go's.
//   - In GPU mode each batch also has NNNNNN.cuda, rendered by the
//     producer's format from the leased batches; opening it takes the same
//     lease as the batch, so release and consumption follow one rule.
//   - Everything but mkdir/rmdir in consumers/, unlink of a batch and
//     the batch being written in ingest/ is read-only (EROFS).
//   - A batch in ingest/ is written through the daemon (DIRECT_IO, never
//     passthrough, so never mapped), and only its writer's last close
//     rules on it: a FLUSH comes for every close of every copy of the
//     descriptor, and one from another process, or while the writer's
//     process still holds a copy, does nothing (writer.go).
//   - A released batch file's inode is pruned from the kernel (NOTIFY_PRUNE)
//     from a goroutine the mount owns, never inside a request, once the
//     store has freed the batch (its page cache serves every consumer
//     until then), so that a run forever keeps the daemon and the kernel
//     flat.
//   - A subset file takes a form at its write (told by its keyword) and a
//     list at its writer's last close (a binary one told by its NUL
//     bytes; a child's or a dup's close applies nothing, as in ingest/),
//     its pieces gathered by offset in whatever order they come; a list is
//     bounded by what the dataset can need (EFBIG) and all lists being
//     written by one total (ENOSPC), and what a list holds is given back
//     when it is refused or closed.
//   - The kernel checks permissions (default_permissions) against the
//     modes and owners given here; other users get in only with
//     AllowOther.
//   - Before the store exists (the source being listed or indexed), a
//     starting mount (starting.go) holds one file, starting, and neither
//     status nor status.json, which programs take as the mount being
//     ready; it is unmounted before the real mount.
//   - A mountpoint that is a symbolic link is refused: a daemon running
//     as root never mounts through a link planted in a shared directory.
//
// What crosses its border: in, the kernel's FUSE requests (through
// go-fuse, imported as fusefs) and Options' renderers (status, state,
// metrics, status.json: the command's) and the store's frees (its
// Invalidator port: the forgetter); out, calls on batchstore (Join,
// Lookup, Open, Hold, Holds, Release, control writes), and the filler's
// own opens of its mount and on package ingest's Writer
// for ingest/, with each store error mapped to one errno (errno()). It
// decides nothing the store does not.
package fs
