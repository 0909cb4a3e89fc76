// Package source is where samples come from: a dataset numbered
// 0..Len()-1 once and for all, each sample a class label and the bytes of
// one encoded image. Everything downstream knows only those numbers.
//
// Kinds: an ImageFolder on a local disk (Folder), WebDataset tar shards
// or the Hub's Parquet files (parquet.go: a file plays the shard, a row
// group's image column chunk the piece, decoded when it arrives by
// internal/pqfile, tsock's own bounded reader of footers and pages; a
// row group is read once an epoch however few of its rows are wanted,
// and a row read alone is its own page once the group's pages are known)
// on a local disk or in an object store (Shards: indexed once at open by
// package wds, or from the index file an earlier open wrote; read in
// pieces, a shard whole or parts of 8 MiB or more, chosen by Arrange from
// the labels so that a shuffle within a window of pieces mixes like a
// uniform one; each epoch then reads each piece it wants much of, once,
// ahead of the workers, within the shard memory and the shard disk (a
// local directory: unnamed files, mapped), and the rest by ranged reads;
// the producer orders epochs with ShardShuffle to suit), ImageFolder-shaped keys
// in an object store (S3Folder: listed once at open, each image one GET),
// and synthetic pictures (Synthetic, served as PPM pixels). A Cache in
// memory or in an unnamed file on disk keeps encoded bytes after their
// first read. Package remote beneath holds the object-store client.
//
// What crosses its border: in, a --source value and Options, through
// Open, the one way in (it also arranges shards and puts the cache in
// front); out, Source's Encoded(ctx, i) — bytes, never pixels: the
// pipeline alone decodes — with Label, Name and Classes. What only some
// sources do is a named optional interface, found through a cache with
// As: Sharded (pieces, the schedule, the shards' stats), Cached (what the
// cache holds, its stats), Rescanner (list a folder again), Versioned,
// Remote (object-store counters), Skipper (members left out at
// indexing). Callers outside never name a concrete source type; tests
// build sources of their own with Open, NewCache and producertest's
// helpers.
//
// Invariants:
//   - A sample's index, label and name never change once given; a rescan
//     only appends, and names the samples whose files it no longer
//     found (Rescanner.Removed).
//   - A shard's samples are read only from the version that was indexed
//     (ETag, or inode, size and mtime): a replaced shard's samples fail
//     with ErrShardChanged, never read at stale offsets.
//   - ctx ends a remote request and its retries: a stopping producer
//     waits on none. An object store that keeps failing returns
//     remote.ErrUnavailable, which says nothing of the sample.
//   - Per sample a source keeps a few compact fields (offsets, labels),
//     no Go object.
//   - Pieces held or being read never exceed the shard memory and disk:
//     what is mapped in memory never passes the shard memory, nor on disk
//     the shard disk (a piece without room is read sample by sample; one
//     over a quarter of both is read by ranges); the next epoch's
//     read-ahead is a guess that costs bytes when wrong, never a sample:
//     a sample is served from a shard only under the plan that asked it.
//   - An index file is used only where every shard is the version it
//     was written from; any other file is rebuilt, never trusted. It is
//     read only where nobody but this user or root could have written
//     it, and never overwritten where it is not an index of tsock's
//     (shardindex.go's trust model).
//   - An index is whole or an error: a stream that broke (a read error,
//     a cancelled run) fails the open and is never kept short; only a
//     shard's own bytes cut it, and what they cost is counted
//     (Skipper.LeftOut).
//   - A copy (Cache's files; the producer's kept samples; pieces
//     carried into the next epoch) is served only while its source is
//     the version it was read from (Versioned: a folder's file at each
//     read, a shard once an epoch).
//   - A listing follows directory links by walk.go's rules (never into
//     the source's own folder or one above it, never into a pseudo file
//     system) and stops when its context ends.
package source
