// Package producer turns a source of images into batches in the store: the
// one pipeline that every consumer shares.
//
// A dispatcher walks each epoch's shuffled order and hands samples to
// workers (all cores by default); each worker decodes, crops, resizes and
// flips into a reusable sample buffer; the assembler takes the results in
// order, copies them into a memory-backed batch file, and publishes it.
// The assembler reserves room in the store before it allocates a file, so
// memory never exceeds --buffer; when the buffer is full the assembler
// blocks, then the workers run out of sample buffers and block too.
// Workers spend their time in C (libjpeg-turbo, the resize passes); a
// process running them wants a P per worker beyond its cores (GoProcs),
// or the runtime hands a worker's P away at every call and the worker
// waits for one on its way back.
//
// Sources: an ImageFolder (Folder), WebDataset tar shards on a local disk
// or in an object store (Shards: indexed once at open by package wds,
// each image then read by one ranged read), ImageFolder-shaped keys in an
// object store (S3Folder: listed once at open, each image one GET), and
// synthetic images; package remote holds the object-store client. A
// Source numbers its samples once and for all; everything downstream
// knows only those numbers. With Config.Fetch a fetcher reads encoded
// samples ahead of the workers in the dispatcher's order, so round trips
// to a remote store overlap; a Cache (memory or an unnamed file on disk)
// keeps them after their first read.
//
// Invariants:
//   - Each epoch holds every decodable sample exactly once; a batch never
//     straddles two epochs; only an epoch's last batch may be short.
//   - A sample's crop and flip depend only on (seed, epoch, dataset index),
//     and an epoch's order only on (seed, epoch): any run with the same
//     seed produces the same bytes, whatever the worker count.
//   - A sample that fails to load or decode is skipped, counted once per
//     file with its reason, and left out of later epochs; the batch is
//     filled from the samples after it, so the order stays deterministic.
//   - A JPEG is verified whole the first time it is decoded (producer
//     epoch 0); later decodes read only the crop's region.
//   - In GPU mode a batch's data is on its GPU slab before it is
//     published, and the slab is returned only when the batch is freed.
//   - A run forever keeps no state per epoch: only the epoch being made
//     is counted (Stats, the assembler), so memory stays flat.
//   - A shard's samples are read only from the version that was indexed
//     (ETag, or inode, size and mtime): a replaced shard's samples are
//     skipped, never read at stale offsets.
//   - An object store that keeps failing stops the pipeline
//     (remote.ErrUnavailable): it says nothing of the data, so no sample
//     is marked bad for it.
//   - When every sample is skipped the pipeline stops with an error that
//     wraps batchstore.ErrNoSamples and names the source and the count.
package producer
