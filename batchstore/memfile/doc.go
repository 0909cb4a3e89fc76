// Package memfile allocates the memory-backed files that hold published
// batches: one file per batch, written once through a shared mapping,
// then only read (by the kernel through FUSE passthrough, or by the daemon).
//
// Two backings: an anonymous memfd, which works everywhere, and unnamed
// O_TMPFILE files on a tmpfs that tsock mounts itself with huge pages
// (huge=within_size), which passthrough reads at page-cache speed. Either
// way the memory is freed when the last descriptor closes, so a crashed
// daemon leaves nothing behind.
package memfile
