//go:build !race

package producer_test

// fleetSamples is the dataset size of the sparse-fleet tests.
const fleetSamples = 20000
