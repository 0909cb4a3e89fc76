// Package batchfile is tsock's one batch format: safetensors files whose
// tensors all have the batch's samples along their first dimension. The
// built-in producer writes it, ingest validates what outside producers
// write, and re-batching cuts it along the first dimension; the .cuda
// control files describe the same tensors on a GPU slab.
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
