package skipbudget

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// ErrExceeded: more samples were skipped than the run allows
// (--max-skipped): the data is damaged past what a training should be
// handed in silence, so the run fails instead of delivering short epochs.
var ErrExceeded = errors.New("more samples skipped than --max-skipped allows")

// Budget bounds the distinct samples a run may skip, each for what
// its own bytes say (a corrupt or unreadable file): a count, or a share
// of the dataset. The zero value bounds nothing.
type Budget struct {
	count int // at most this many (without percent)
	// else at most num/den of the dataset, rounded down: integers, so
	// that 29% of 200 is 58, not the 57 of 0.29*200 in floating point.
	num, den uint64
	percent  bool
	bounded  bool
	asString string
}

// Default lets a few corrupt files through (ImageNet's train set
// holds a handful that some decoders refuse) and stops a run whose data
// lost a tenth: a mount of a half-copied folder or a failing disk.
const Default = "10%"

// maxPercentDigits bounds a percentage's decimals: 0.000001% of the
// largest dataset is still a sample.
const maxPercentDigits = 6

// Parse reads --max-skipped: a whole number of samples ("0":
// none may be skipped), or a percentage of the dataset from 0% to 100%,
// in decimals ("10%", "2.5%": at most 6 after the point).
func Parse(s string) (Budget, error) {
	b := Budget{bounded: true, asString: s}
	bad := fmt.Errorf("max-skipped %q: want a whole number of samples or a percentage from 0%% to 100%% (at most %d decimals)", s, maxPercentDigits)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		whole, frac, _ := strings.Cut(p, ".")
		if whole == "" || len(frac) > maxPercentDigits || !allDigits(whole) || !allDigits(frac) || len(whole) > 3 {
			return Budget{}, bad
		}
		digits, _ := strconv.ParseUint(whole+frac, 10, 64)
		b.num, b.den, b.percent = digits, 100*pow10(len(frac)), true
		if b.num > b.den {
			return Budget{}, bad
		}
		return b, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || !allDigits(s) {
		return Budget{}, bad
	}
	b.count = n
	return b, nil
}

func allDigits(s string) bool {
	return strings.Trim(s, "0123456789") == ""
}

func pow10(n int) uint64 {
	p := uint64(1)
	for range n {
		p *= 10
	}
	return p
}

// String is the budget as given.
func (b Budget) String() string {
	if !b.bounded {
		return "none"
	}
	return b.asString
}

// Allowed is how many of samples may be skipped; -1: unbounded.
func (b Budget) Allowed(samples int) int {
	switch {
	case !b.bounded:
		return -1
	case b.percent:
		// floor(samples * num / den) in 128 bits: num <= den keeps the
		// high word below den, and the result at most samples.
		hi, lo := bits.Mul64(uint64(max(samples, 0)), b.num)
		q, _ := bits.Div64(hi, lo, b.den)
		return int(q)
	}
	return b.count
}

// Check returns an error wrapping ErrExceeded if skipped of samples is
// over the budget.
func (b Budget) Check(skipped, samples int) error {
	if n := b.Allowed(samples); n >= 0 && skipped > n {
		return fmt.Errorf("%d of %d samples skipped, over --max-skipped %s (%d): %w", skipped, samples, b, n, ErrExceeded)
	}
	return nil
}
