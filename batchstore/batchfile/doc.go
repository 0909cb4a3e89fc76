// Package batchfile is tsock's one batch format: safetensors files whose
// tensors all have the batch's samples along their first dimension. It
// sits between the producers and the store, shared by both producers and
// fs: the built-in pipeline lays its batches out with Layout and Meta,
// ingest validates what outside producers write with Parse, the store
// measures re-batched files with Measure, and fs cuts them with Compose;
// the .cuda control files describe the same tensors on a GPU slab.
//
// What crosses its border: in, a batch's bytes (or a Blob of them) and
// the store's Refs; out, parsed Headers, composed files and their sizes;
// and, in GPU mode, a Blob's upload to a gpu.Pool slab and the .cuda
// files that describe it. It decodes nothing, but it owns the built-in
// pipeline's image tensor layout (Layout: uint8, NCHW or NHWC, and its
// Meta), which ParseBatch reads back with the labels and indices, for
// tests and tools.
//
// A batch of B samples is any set of named tensors of the dtypes in
// Dtypes whose first dimension is B. A tensor x whose samples vary in
// length has a companion "x.offsets": int64, shape [B+1], from 0 up to
// x's first dimension, never decreasing; sample i is
// x[offsets[i]:offsets[i+1]].
//
// Invariants:
//   - Parse accepts only files that the safetensors specification accepts
//     (no holes, no overlaps, no bytes past the tensors) and that are
//     batches as above; it never panics and never allocates more than
//     the header's length, whatever the bytes.
//   - Cut reads no tensor data: its size and layout follow from the
//     parsed headers alone, so a file's exact size is known before its
//     batches are leased.
//   - Encoded headers are padded with spaces so that the data starts on
//     a multiple of the alignment asked for (a page for tsock's files):
//     mmap gives aligned, zero-copy tensors.
package batchfile
