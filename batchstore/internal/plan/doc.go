// Package plan is batchstore's functional core: the store's decisions as
// pure functions of a view of its state, with no mutex, no goroutine
// and no clock. What consumer c's batch j holds (Next, EpochEnd), where
// a joining consumer starts (Place), whether a consumer still needs a
// producer batch, which is what may be freed (Needs), what the producer
// makes next (NeedBound), whether a subset is admitted beside what
// the others want (Admit), how a group's rounds are dealt to its ranks
// (Share) and, for ranks across nodes, each node's run of the data and
// count an epoch (NodeRun, NodeDeal, NodePad; not served by the mount
// yet) are decided here;
// batchstore's Store is the shell around it: it holds the lock, builds
// the view (Stream, Joining, Reader) over its state for one call, applies
// what is decided (a batch computed, a placement, a free), and does the
// waiting, the wake-ups, the blobs, the leases and the clocks.
//
// Invariants the functions keep, for any view:
//   - A consumer's batches are consecutive runs of global samples, with
//     no gap and no repeat, never straddling one of its own epochs' ends,
//     and short only at an epoch's end (or where the shell allows a stuck
//     consumer a short batch: Reader.AllowShort).
//   - A batch is Known only from samples already published; where its end
//     or its epoch's end depends on what is not published yet, the answer
//     is UnknownYet, never a guess.
//   - An epoch of a consumer's with none of its samples is passed over
//     whole: a batch has at least one sample.
//   - A consumer that joins mid-epoch is placed at a split (Placement.Split):
//     its first epoch ends where the next producer epoch has put the
//     samples it missed (batchstore's StitchOrder), its later epochs are
//     whole producer epochs from the one after.
//
// What crosses its border: in, views the shell builds (interfaces and
// plain values, read only for the call); out, plain values (Batch,
// Placement, Resolved, bool). It imports nothing of tsock.
package plan
