// Package waittest is the one way tests wait for a state that is reached
// with no event to wait on: the kernel's asynchronous RELEASE after a
// close, another goroutine's or another process's progress. It polls,
// and fails the test after a bound far above any healthy wait, so that
// a hang fails instead of blocking the suite; the bound is never a
// measure of speed.
package waittest
