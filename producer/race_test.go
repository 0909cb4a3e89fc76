//go:build race

package producer_test

// fleetSamples is the dataset size of the sparse-fleet tests: the race
// detector slows the pipeline about tenfold, so the same shape runs on
// fewer samples.
const fleetSamples = 4000
