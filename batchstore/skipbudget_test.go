package batchstore

import (
	"errors"
	"math"
	"testing"
)

func TestSkipBudget(t *testing.T) {
	for _, tc := range []struct {
		budget           string
		skipped, samples int
		over             bool
	}{
		{"10%", 10, 100, false}, {"10%", 11, 100, true}, {"10%", 0, 5, false}, {"10%", 1, 5, true},
		{"0", 0, 100, false}, {"0", 1, 100, true}, {"0%", 1, 100, true}, {"100%", 100, 100, false},
		{"3", 3, 10, false}, {"3", 4, 10, true}, {"2.5%", 25, 1000, false}, {"2.5%", 26, 1000, true},
	} {
		b, err := ParseSkipBudget(tc.budget)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Check(tc.skipped, tc.samples); (err != nil) != tc.over || (err != nil && !errors.Is(err, ErrSkipBudget)) {
			t.Errorf("%s, %d of %d skipped: %v", tc.budget, tc.skipped, tc.samples, err)
		}
	}
	if b, _ := ParseSkipBudget("100%"); b.Allowed(math.MaxInt) != math.MaxInt || b.Check(math.MaxInt, math.MaxInt) != nil {
		t.Error("100% of the largest dataset overflows")
	}
	if (SkipBudget{}).Check(1<<40, 1) != nil {
		t.Error("the zero budget bounds something")
	}
	for _, bad := range []string{"", "-1", "x", "101%", "-1%", "NaN%", "1e999%", "%", "10 %", "9999999999999999999999"} {
		if _, err := ParseSkipBudget(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseSkipBudget: any value parses into a budget that checks without
// a panic, or is refused.
func FuzzParseSkipBudget(f *testing.F) {
	for _, s := range []string{"10%", "0", "100%", "1e-9%", "5"} {
		f.Add(s, 3, 10)
	}
	f.Fuzz(func(t *testing.T, s string, skipped, samples int) {
		b, err := ParseSkipBudget(s)
		if err != nil {
			return
		}
		if n := b.Allowed(max(samples, 0)); n < 0 {
			t.Fatalf("%q: a parsed budget allows %d", s, n)
		}
		b.Check(skipped, samples)
	})
}
