package skipbudget

import (
	"errors"
	"math"
	"strconv"
	"testing"
)

func TestBudget(t *testing.T) {
	for _, tc := range []struct {
		budget           string
		skipped, samples int
		over             bool
	}{
		{"10%", 10, 100, false}, {"10%", 11, 100, true}, {"10%", 0, 5, false}, {"10%", 1, 5, true},
		{"0", 0, 100, false}, {"0", 1, 100, true}, {"0%", 1, 100, true}, {"100%", 100, 100, false},
		{"3", 3, 10, false}, {"3", 4, 10, true}, {"2.5%", 25, 1000, false}, {"2.5%", 26, 1000, true},
		// The boundary of every percentage of 200 (0.29*200 is 57.99… in
		// floating point): exactly p*2 samples allowed, one more refused.
	} {
		b, err := Parse(tc.budget)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Check(tc.skipped, tc.samples); (err != nil) != tc.over || (err != nil && !errors.Is(err, ErrExceeded)) {
			t.Errorf("%s, %d of %d skipped: %v", tc.budget, tc.skipped, tc.samples, err)
		}
	}
	for p := 0; p <= 100; p++ {
		b, err := Parse(strconv.Itoa(p) + "%")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Check(2*p, 200); err != nil {
			t.Errorf("%d%% of 200: %d skipped refused: %v", p, 2*p, err)
		}
		if err := b.Check(2*p+1, 200); p < 100 && !errors.Is(err, ErrExceeded) {
			t.Errorf("%d%% of 200: %d skipped allowed", p, 2*p+1)
		}
	}
	for _, tc := range []struct {
		budget           string
		samples, allowed int
	}{{"0.5%", 1000, 5}, {"0.001%", 100000, 1}, {"0.000001%", 100000000, 1}, {"33.333333%", 3, 0}, {"33.333334%", 3, 1}, {"7", 3, 7}} {
		if b, err := Parse(tc.budget); err != nil || b.Allowed(tc.samples) != tc.allowed {
			t.Errorf("%s of %d: allowed %d (%v), want %d", tc.budget, tc.samples, b.Allowed(tc.samples), err, tc.allowed)
		}
	}
	if b, _ := Parse("100%"); b.Allowed(math.MaxInt) != math.MaxInt || b.Check(math.MaxInt, math.MaxInt) != nil {
		t.Error("100% of the largest dataset overflows")
	}
	if (Budget{}).Check(1<<40, 1) != nil {
		t.Error("the zero budget bounds something")
	}
	for _, bad := range []string{"", "-1", "x", "101%", "-1%", "NaN%", "1e999%", "%", "10 %", "9999999999999999999999", "1e-9%", "0.0000001%", "+5", "+5%", ".5%", "100.000001%", "1000%"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParse: any value parses into a budget that checks without
// a panic, or is refused.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"10%", "0", "100%", "0.000001%", "5", "29%"} {
		f.Add(s, 3, 10)
	}
	f.Fuzz(func(t *testing.T, s string, skipped, samples int) {
		b, err := Parse(s)
		if err != nil {
			return
		}
		if n := b.Allowed(max(samples, 0)); n < 0 {
			t.Fatalf("%q: a parsed budget allows %d", s, n)
		}
		b.Check(skipped, samples)
	})
}
