package producer

import (
	"testing"

	"github.com/tsock/tsock/producer/skipbudget"
)

// TestVanishing: a dataset is vanishing once more of its keys are gone
// than the skip budget allows to skip (half, where it allows any
// number), or when none is left.
func TestVanishing(t *testing.T) {
	tenth, err := skipbudget.Parse("10%")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		left, of, samples int
		budget            skipbudget.Budget
		want              bool
	}{
		{99, 100, 1000, tenth, false}, // a key gone: its samples' loss
		{90, 100, 1000, tenth, false}, // a tenth: what the budget allows
		{89, 100, 1000, tenth, true},
		{1, 40, 40, skipbudget.Budget{}, true}, // every key but one, no budget: half
		{30, 40, 40, skipbudget.Budget{}, false},
		{0, 40, 40, skipbudget.Budget{}, true},
		{0, 0, 0, tenth, true},
	} {
		if got := vanishing(tc.left, tc.of, tc.samples, tc.budget); got != tc.want {
			t.Errorf("%d of %d keys left, %d samples, budget %v: vanishing %v", tc.left, tc.of, tc.samples, tc.budget, got)
		}
	}
}
