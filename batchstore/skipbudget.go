package batchstore

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrSkipBudget: more samples were skipped than the run allows
// (--max-skipped): the data is damaged past what a training should be
// handed in silence, so the run fails instead of delivering short epochs.
var ErrSkipBudget = errors.New("more samples skipped than --max-skipped allows")

// SkipBudget bounds the distinct samples a run may skip, each for what
// its own bytes say (a corrupt or unreadable file): a count, or a share
// of the dataset. The zero value bounds nothing.
type SkipBudget struct {
	count    int     // at most this many (with percent 0)
	percent  float64 // else at most this percent of the dataset
	bounded  bool
	asString string
}

// DefaultSkipBudget lets a few corrupt files through (ImageNet's train set
// holds a handful that some decoders refuse) and stops a run whose data
// lost a tenth: a mount of a half-copied folder or a failing disk.
const DefaultSkipBudget = "10%"

// ParseSkipBudget reads --max-skipped: a whole number of samples ("0":
// none may be skipped), or a percentage of the dataset ("10%").
func ParseSkipBudget(s string) (SkipBudget, error) {
	b := SkipBudget{bounded: true, asString: s}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
			return SkipBudget{}, fmt.Errorf("max-skipped %q: want a whole number of samples or a percentage from 0%% to 100%%", s)
		}
		b.percent = v
		return b, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return SkipBudget{}, fmt.Errorf("max-skipped %q: want a whole number of samples or a percentage from 0%% to 100%%", s)
	}
	b.count = n
	return b, nil
}

// String is the budget as given.
func (b SkipBudget) String() string {
	if !b.bounded {
		return "none"
	}
	return b.asString
}

// Allowed is how many of samples may be skipped; -1: unbounded.
func (b SkipBudget) Allowed(samples int) int {
	switch {
	case !b.bounded:
		return -1
	case b.percent > 0:
		// Never more than samples: a float at or past an int's range
		// converts to anything.
		if f := math.Floor(b.percent / 100 * float64(samples)); f < float64(samples) {
			return max(int(f), 0)
		}
		return max(samples, 0)
	}
	return b.count
}

// Check returns an error wrapping ErrSkipBudget if skipped of samples is
// over the budget.
func (b SkipBudget) Check(skipped, samples int) error {
	if n := b.Allowed(samples); n >= 0 && skipped > n {
		return fmt.Errorf("%d of %d samples skipped, over --max-skipped %s (%d): %w", skipped, samples, b, n, ErrSkipBudget)
	}
	return nil
}
