// Package ingest fills the store from outside producers: any program
// that writes safetensors batches into MOUNTPOINT/ingest/. It is the
// second way to fill the store, beside the built-in pipeline, and knows
// nothing of decoding.
//
// A producer creates ingest/NNNNNN.safetensors, NNNNNN being the next
// sequence number (ingest/next), writes one batch and closes it. The
// create waits for room in the buffer; the close validates the batch,
// lays its header out again with tsock's metadata and publishes it, or
// refuses it with an errno and publishes nothing.
//
// Ordered mode (--samples N): tsock owns the sampler. ingest/order waits
// until some consumer needs samples and gives the dataset indices to
// make next, in the store's stitched order; each batch's "indices"
// tensor must continue that order (gaps are samples the producer could
// not make: skipped, and left out of later epochs). Unordered mode: the
// producer's "epoch" metadata marks its epochs.
//
// Invariants:
//   - At most one batch is being written at a time; a batch is published
//     whole or not at all, and its sequence number only then advances.
//   - The buffer holds at most --buffer of published and reserved
//     batches; a batch is reserved at create (the size of the largest
//     so far) and its reservation is made exact at close.
//   - Every published batch has the first one's tensors (names, dtypes,
//     dimensions after the first, raggedness), so that any run of
//     samples can be cut into a consumer's own batch.
package ingest
