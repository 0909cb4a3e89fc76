// Package source is where samples come from: a dataset numbered
// 0..Len()-1 once and for all, each sample a class label and the bytes of
// one encoded image. Everything downstream knows only those numbers.
//
// Kinds: an ImageFolder on a local disk (Folder), WebDataset tar shards
// on a local disk or in an object store (Shards: indexed once at open by
// package wds, each image then one ranged read), ImageFolder-shaped keys
// in an object store (S3Folder: listed once at open, each image one GET),
// and synthetic pictures (Synthetic, served as PPM pixels). A Cache in
// memory or in an unnamed file on disk keeps encoded bytes after their
// first read. Package remote beneath holds the object-store client.
//
// What crosses its border: out, Source's Encoded(ctx, i) — bytes, never
// pixels: the pipeline alone decodes — with Label, Name and Classes.
// What only some sources do is a named optional interface, found through
// a cache with As: Rescanner (list a folder again), Remote (object-store
// counters), Skipper (members left out at indexing).
//
// Invariants:
//   - A sample's index, label and name never change once given; a rescan
//     only appends.
//   - A shard's samples are read only from the version that was indexed
//     (ETag, or inode, size and mtime): a replaced shard's samples fail
//     with ErrShardChanged, never read at stale offsets.
//   - ctx ends a remote request and its retries: a stopping producer
//     waits on none. An object store that keeps failing returns
//     remote.ErrUnavailable, which says nothing of the sample.
//   - Per sample a source keeps a few compact fields (offsets, labels),
//     no Go object.
package source
