// Package ingest fills the store from outside producers: any program
// that writes safetensors batches into MOUNTPOINT/ingest/. It is the
// second way to fill the store, beside the built-in pipeline, and knows
// nothing of decoding.
//
// A producer creates ingest/NNNNNN.safetensors, NNNNNN being the next
// sequence number (ingest/next), writes one batch and closes it. The
// create waits for room in the buffer; every write is charged to it as
// it comes; the writer's close validates the batch, lays its header out
// again with tsock's metadata and publishes it, or refuses it with an
// errno and publishes nothing. Which close is the writer's is the file
// system's to tell (fs): Writer.Close is called for that one alone, and
// Writer.Release rules at the kernel's release on a batch that close
// left empty.
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
//     batches: a batch is reserved at create (the size of the largest so
//     far), its reservation grows with every write that goes past it
//     (waiting for room as a create does; ErrTooLarge past the whole
//     buffer), and it is made exact at close.
//   - A batch's bytes are final once its close has ruled: writes and
//     truncations through any descriptor still open fail with ErrFinal,
//     and published bytes are the store's alone (the daemon wrote them;
//     no writer maps them).
//   - Every published batch has the first one's tensors (names, dtypes,
//     dimensions after the first, raggedness), so that any run of
//     samples can be cut into a consumer's own batch.
//
// What crosses its border: in, from fs, a writer's Create, WriteAt,
// Truncate, Close and Release, and writes of the control files (next,
// samples, skip); out, batches published into batchstore (their Blobs in
// memfile's files, uploaded by gpu in GPU mode), the order (from the
// store's stitching) and Stats for status.
package ingest
