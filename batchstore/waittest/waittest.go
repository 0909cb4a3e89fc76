package waittest

import (
	"fmt"
	"testing"
	"time"
)

// Limit bounds every wait: a bound for a failure (a hang), never a
// verdict on speed. With four race-built packages at a time on two
// cores, filling a buffer of 2560 samples took longer than 20 s.
const Limit = 60 * time.Second

// Until polls cond every millisecond until it holds, failing t after
// Limit with what it waited for.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Report(t, cond, func() string { return "until " + what })
}

// Wait is Until for a goroutine that is not the test's own (which may not
// end the test): it returns an error naming what it waited for instead.
func Wait(what string, cond func() bool) error {
	deadline := time.Now().Add(Limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s until %s", Limit, what)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// Report is Until with the failure's words made when it fails: the state
// that was reached instead (a status file, goroutine stacks).
func Report(t testing.TB, cond func() bool, failure func() string) {
	t.Helper()
	deadline := time.Now().Add(Limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s: %s", Limit, failure())
		}
		time.Sleep(time.Millisecond)
	}
}
