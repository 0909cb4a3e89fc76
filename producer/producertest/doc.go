// Package producertest has what the tests of several packages share:
// small datasets, bad inputs, and the checker of exact epochs.
package producertest
