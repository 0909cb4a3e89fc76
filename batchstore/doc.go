// Package batchstore is tsock's FUSE-free core: a bounded buffer of
// published batches, the consumers that read them, and the leases that say
// who still holds what.
//
// The producer reserves room (blocking while the buffer is full), writes a
// batch into memory-backed storage and publishes it. Each batch gets a
// global sequence number. A consumer joins at the oldest batch still held
// and sees the batches from there on as its own numbers 0, 1, 2, …
//
// Invariants, all kept under Store.mu:
//   - used+reserved never exceeds the limit: the producer never writes a
//     batch that does not fit, and never drops one.
//   - A batch is freed only when no consumer still has it pending, at least
//     one consumer consumed it (so batches made before anyone joined wait
//     for the first joiner), and no lease on it is open (in daemon-read mode
//     an open handle reads from the blob; freeing under it would give short
//     reads or SIGBUS).
//   - A consumer consumes a batch when its last lease on that batch is
//     released after at least one open, or when it unlinks the batch.
//     Consumption is per consumer and may be out of order; the consumer's
//     position is its lowest unconsumed batch.
//   - A consumer's batch has at least one sample: an epoch of its with
//     none is passed over whole. A producer epoch that ends with no
//     sample had every sample of the data skipped (each epoch's order
//     holds every sample not known bad), so the store fails with
//     ErrNoSamples then: waits that nothing could end get it instead.
//
// The store knows nothing of FUSE. The adapter passes a CallerID (the
// kernel's thread id of the request) so that an open of a batch inode that
// several consumer directories share can be charged to the consumer whose
// directory that thread just looked the name up in.
package batchstore
