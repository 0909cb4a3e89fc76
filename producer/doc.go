// Package producer is the scheduling that fills the store: what is made
// next, by whom, and what is kept. The flow beneath it reads as the tree:
// source (package source: sample i's encoded bytes) → pipeline (package
// pipeline: bytes to S×S pixels) → format (batchstore/batchfile) → store
// (batchstore) → fs. Package ingest is the other producer: batches an
// outside program writes.
//
// A dispatcher walks each epoch's shuffled order (ordered from what the
// store's consumers still need) and hands samples to workers (all cores
// by default); each worker reads a sample's bytes and has its
// pipeline.Maker make it into a reusable sample buffer; the assembler
// takes the results in order, copies them into a memory-backed batch
// file, and publishes it. The assembler reserves room in the store before
// it allocates a file, so memory never exceeds --buffer; when the buffer
// is full the assembler blocks, then the workers run out of sample
// buffers and block too. Workers spend their time in C (libjpeg-turbo,
// the resize passes); a process running them wants a P per worker beyond
// its cores (GoProcs), or the runtime hands a worker's P away at every
// call and the worker waits for one on its way back.
//
// With Config.Fetch a fetcher reads encoded samples ahead of the workers
// in the dispatcher's order, so round trips to a remote store overlap.
// With Config.Keep (a deterministic transform) a sample's first making is
// kept and copied into later epochs instead of decoding.
//
// What crosses its border: in, a source.Source and a Config; out,
// published batches in a batchstore.Store, Stats and KeptStats.
//
// Invariants:
//   - Each epoch holds every decodable sample exactly once; a batch never
//     straddles two epochs; only an epoch's last batch may be short.
//   - An epoch's order depends only on (seed, epoch) and the consumers'
//     subsets, and a sample's crop only on (seed, epoch, dataset index):
//     any run with the same seed produces the same bytes, whatever the
//     worker count.
//   - A sample that fails to load or decode is skipped, counted once per
//     file with its reason, and left out of later epochs; the batch is
//     filled from the samples after it, so the order stays deterministic.
//     Past Config.MaxSkipped (--max-skipped) the run fails instead
//     (skipbudget.ErrExceeded). Under --rescan a skipped sample whose
//     file changed (source.Versioned) is tried again.
//   - A kept sample (Config.Keep) is served only while its file or
//     shard is the version it was made from; a changed one is made
//     again, a deleted one skipped.
//   - The skip budget counts what the source left out at open
//     (source.Skipper) beside what is skipped later, over the dataset it
//     should have been; a file removed from a rescanned folder leaves the
//     dataset (Stats.Removed) and is never counted.
//   - What tells of the store, not of a sample (remote.StoreFault: a
//     store that keeps failing, credentials refused, a dataset gone) and
//     reads cut short by the run stopping never mark a sample bad.
//   - A key found missing (remote.ErrNotFound, in a source.Vanisher) is
//     held out of its epoch and ruled on once the epoch is made, from one
//     listing: its sample's loss while the dataset is there; the store's
//     state, failing the run and counting none, where the dataset is
//     gone or going (settleMissing).
//   - Whatever the fetcher read ahead for a sample is taken by its worker
//     or given back (fetcher.drop): a sample served from a kept copy, or
//     gone, never holds the window of reads ahead.
//   - In GPU mode a batch's data is on its GPU slab before it is
//     published, and the slab is returned only when the batch is freed.
//   - A run forever keeps no state per epoch: only the epoch being made
//     is counted (Stats, the assembler), so memory stays flat.
//   - An object store that keeps failing stops the pipeline
//     (remote.ErrUnavailable): it says nothing of the data, so no sample
//     is marked bad for it.
//   - When every sample is skipped the pipeline stops with an error that
//     wraps batchstore.ErrNoSamples and names the source and the count.
package producer
