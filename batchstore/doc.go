// Package batchstore is tsock's FUSE-free core: a bounded buffer of
// published batches, the consumers that read them, and the leases that say
// who still holds what.
//
// The producer reserves room (blocking while the buffer is full), writes a
// batch into memory-backed storage and publishes it. Each batch gets a
// global sequence number. A consumer joins at the oldest batch still held
// and sees the batches from there on as its own numbers 0, 1, 2, …
//
// The store is a shell around a functional core, package
// batchstore/internal/plan: what consumer c's batch j holds, where a
// joiner starts, and whether a consumer still needs a producer batch
// (what may be freed) are pure functions there, of views the store
// builds over its state for one call (the Store is a plan.Stream; a
// consumer, a plan.Reader; view.go). The shell holds the lock, builds the
// views, applies what is decided (a batch computed, a placement, a free)
// and does what the core cannot: waiting and waking, the blobs, the
// leases, the clocks.
//
// One lock, Store.mu, guards all of the store's state; only Store's
// exported methods take it, and every other method runs with it held.
// The state is split by concern into four parts, each a type in its own
// files, so that a reader of one file knows what it owns:
//
//   - buffer (buffer.go): the held batches, their bytes and the
//     reservations; Reserve, Publish, freeing, lingering memory. What the
//     producer waits on.
//   - roster (consumer.go, placement.go, lookup.go, lease.go, subset.go):
//     the consumers, where each is placed, the batches its numbers
//     resolve to, its leases and subsets. What the file system asks.
//   - demand (demand.go, settle.go, order.go): each producer epoch's
//     order, and what the decided consumers want of it: Wants, WaitNeed,
//     Needs, NeedUpTo. What the producer asks (demand flowing back, see
//     docs/architecture.md).
//   - evictor (evict.go): the rules that evict a consumer or fail its
//     waits when it cannot progress.
//
// A part asks another through its methods (s.buf.oldest(), s.ros.all()),
// never by reading or writing its fields (TestNoPartReachesAnothersFields
// reads the source for it), and never by a lock of its own: there is
// none. Only the Store's own methods, the shell, read every part.
//
// Across nodes (node.go): the store of node K of N (Config.Node, whose
// node order the producer computes from the source and the seed) serves
// each consumer its node's share of its data instead of all of it, a
// subset like any other (Node.cut, plan.NodeSamples: the same count on
// every node), and of a group only the ranks K·W/N to (K+1)·W/N−1. What
// no consumer has asked for yet is made of the node's share of all the
// data (Store.universe), never of all of it.

// Invariants, all kept under Store.mu:
//
//   - used+reserved never exceeds the limit: the producer never writes a
//     batch that does not fit, and never drops one.
//
//   - A batch is freed only when no consumer still has it pending, at least
//     one consumer consumed it (so batches made before anyone joined wait
//     for the first joiner), and no lease on it is open (in daemon-read mode
//     an open handle reads from the blob; freeing under it would give short
//     reads or SIGBUS).
//
//   - A consumer consumes a batch when its last lease on that batch is
//     released after at least one open, or when it unlinks the batch. A
//     Hold (the file system reading a batch ahead) is a lease charged to
//     no consumer: it keeps the batch from being freed and consumes
//     nothing.
//     Consumption is per consumer and may be out of order; the consumer's
//     position is its lowest unconsumed batch.
//
//   - A consumer's batch has at least one sample: an epoch of its with
//     none is passed over whole. A producer epoch that ends with no
//     sample had every sample of the data skipped (each epoch's order
//     holds every sample not known bad), so the store fails with
//     ErrNoSamples then: waits that nothing could end get it instead.
//
//   - A consumer that joins mid-epoch (a split) reads a stitched first
//     epoch: the rest of that producer epoch, then the samples it missed,
//     which the next producer epoch puts first. A split binds only that
//     next epoch's order; the consumer's later epochs are whole producer
//     epochs from the one after, so every later order is a fresh
//     shuffle, uniform for every consumer.
//
//   - A consumer's subset (nil: everything) picks its samples out of the
//     shared stream by each batch's dataset indices (Info.Indices); every
//     one of its epochs holds exactly its subset of the producer epochs
//     it spans. The producer orders each epoch from the union of the
//     active consumers' subsets (wanted, kept in the epoch's mark): a
//     consumer whose subset a ordered epoch lacks starts after it, and a
//     subset set while reading applies from its first epoch that starts
//     in an unplanned producer epoch, never inside one.
//
//   - A consumer is undecided from its join until it sets a subset or
//     reads: until then it holds no epoch's order back. The producer makes a
//     sample only if a decided consumer reading its epoch wants it (or
//     none is decided: the buffer fills for whoever joins); what it
//     passes over is recorded, and a consumer is settled (settle.go)
//     only where none of its subset was passed over and its first batch
//     fits the buffer. Its batches computed before it reads (a listing)
//     are forgotten whenever its placement or batch size changes.
//
//   - A subset is admitted only if every decided consumer's batch, under
//     what all want together, spans no more producer batches than the
//     buffer holds; and where one still cannot complete while it holds
//     the oldest batch and the producer waits for room, it gets a short
//     batch (stuck) rather than a deadlock.
//
//   - A consumer is evicted, or its waits fail with ErrDeadlock, only
//     after one condition (evict.go: stalled, straggling, self-blocked,
//     mapped out) has held for the whole consumer timeout; each rule is
//     a function of the consumer's clocks and one check's view of the
//     store, applied in a fixed order.
//
// A consumer's state is grouped by concern (placement, holding,
// lifecycle, clocks, readStats, subsetState), all under the one mutex.
//
// The store knows nothing of FUSE. The adapter passes a CallerID (the
// kernel's thread id of the request) so that an open of a batch inode that
// several consumer directories share can be charged to the consumer whose
// directory that thread just looked the name up in. An open by a thread
// that looked nothing up (a reopen through /proc/self/fd) is the
// consumer's that looked the batch up where only one did, and refused
// (ErrAmbiguous) where several did: never charged to a guess.
//
// What crosses its border: in, from a producer (the built-in pipeline or
// package ingest), Reserve/Publish of a batch's Blob with its Info, the
// epochs' orders (FixOrder), and the questions that make demand flow back
// (WaitNeed, Wants, Needs: what to make next); from the file system (fs),
// Join/Leave, SetBatchSize, subsets, Lookup and Open of a consumer's
// batch, and the lease Release. Out: Refs and Leases over Blobs it never
// reads, Snapshots for status, errors the file system maps to errnos
// (errors.go), and one port it pushes to: the Invalidator, told the moment
// a batch is freed (the file system forgets its file then; nothing polls
// the store). It imports no FUSE, no decoder and no source.
package batchstore
