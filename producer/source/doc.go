// Package source is where samples come from: a dataset numbered
// 0..Len()-1 once and for all, each sample a class label and the bytes of
// one encoded image. Everything downstream knows only those numbers.
//
// Kinds: an ImageFolder on a local disk (Folder), WebDataset tar shards
// on a local disk or in an object store (Shards: indexed once at open by
// package wds, or from the index file an earlier open wrote; each epoch
// then reads each shard it wants much of whole, once, ahead of the
// workers, within a memory budget, and the rest by ranged reads; the
// producer orders epochs with ShardShuffle to suit), ImageFolder-shaped keys
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
//   - Whole shards held or being read never exceed the shard memory (a
//     shard over a quarter of it is read by ranges); the next epoch's
//     read-ahead is a guess that costs bytes when wrong, never a sample:
//     a sample is served from a shard only under the plan that asked it.
//   - An index file is used only where every shard is the version it
//     was written from; any other file is rebuilt, never trusted.
package source
