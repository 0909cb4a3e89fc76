// Package skipbudget is the bound on the samples a run may skip
// (--max-skipped): a count, or a share of the dataset.
//
// A sample is skipped only for what its own bytes say (a corrupt image, a
// truncated record), and each skip is counted; a run whose skips pass the
// budget fails (ErrExceeded) instead of delivering short epochs that look
// done. The producers (the built-in pipeline and package ingest) own the
// count and call Check; the store learns of a failed run only as the
// producer's failure (batchstore.Store.Fail), which consumers read as EIO.
//
// What crosses its border: in, the flag's text (Parse) and the counts;
// out, a Budget and errors wrapping ErrExceeded. It imports nothing of
// tsock.
package skipbudget
