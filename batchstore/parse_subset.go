package batchstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Dataset is what a subset is written against: its size, and, where the
// source has them, its labels and class names.
type Dataset struct {
	Len     int
	Label   func(i int) int // nil: no labels (an ingest)
	Classes []string        // class names by label; nil: none known
	Seed    uint64          // folds are a partition drawn from it
}

// ParseSubset reads what a consumer's subset file was given:
//
//	all                  every sample (nil)
//	fold K/N             K-fold cross-validation's training part: every sample not in fold K of N
//	holdout K/N          fold K of N itself
//	classes A B …        the samples of these classes (names, else label numbers)
//	12\n40\n…            an explicit list of dataset indices, one per line
//	(binary)             an explicit list as little-endian int64s: told from
//	                     text by a NUL byte (an index below 2^56 has one)
//
// Folds are a partition of the dataset drawn from d.Seed, stratified by
// class where there are labels: the same K/N gives the same folds on every
// mount of the same source and seed. An index out of range, a repeated
// one, a fold like 6/5, an unknown class or an empty subset is refused
// with ErrBadSubset and a message that names it.
func ParseSubset(text []byte, d Dataset) (*Subset, error) {
	if bytes.IndexByte(text, 0) >= 0 {
		return binaryList(text, d)
	}
	// The text is read where it lies: a list of millions of indices is
	// never copied whole.
	s := bytes.TrimSpace(text)
	wordBytes, restBytes, _ := bytes.Cut(s, []byte(" "))
	word := "" // a list, or nonsense: no keyword is longer than holdout
	if len(wordBytes) <= len("holdout") {
		word = string(wordBytes)
	}
	switch word {
	case "all":
		if len(restBytes) != 0 {
			return nil, badSubset("all takes nothing after it")
		}
		return nil, nil
	case "fold", "holdout":
		rest := string(restBytes)
		k, n, err := parseFold(rest, d.Len)
		if err != nil {
			return nil, err
		}
		folds := foldsOf(d, n)
		form := fmt.Sprintf("%s %d/%d", word, k, n)
		if word == "fold" {
			return NewSubset(form, d.Len, func(i int) bool { return folds[i] != k-1 })
		}
		return NewSubset(form, d.Len, func(i int) bool { return folds[i] == k-1 })
	case "classes":
		return classSubset(strings.Fields(string(restBytes)), d)
	}
	if len(s) == 0 {
		return nil, badSubset("empty: write all, fold K/N, holdout K/N, classes A B …, or dataset indices")
	}
	return textList(s, d)
}

func badSubset(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrBadSubset)
}

// parseFold reads "K/N": 1 ≤ K ≤ N, 2 ≤ N ≤ the dataset's size.
func parseFold(s string, size int) (k, n int, err error) {
	ks, ns, ok := strings.Cut(strings.TrimSpace(s), "/")
	k, errK := strconv.Atoi(ks)
	n, errN := strconv.Atoi(ns)
	switch {
	case !ok || errK != nil || errN != nil:
		return 0, 0, badSubset("fold %q: want K/N, as 2/5", s)
	case n < 2 || n > size:
		return 0, 0, badSubset("fold %d/%d: N must be 2 to the dataset's %d samples", k, n, size)
	case k < 1 || k > n:
		return 0, 0, badSubset("fold %d/%d: K must be 1 to %d", k, n, n)
	}
	return k, n, nil
}

// foldsOf deals the dataset into n folds: each class's samples (all of
// them, where there are no labels) in a shuffle drawn from the seed, one
// fold after the other, continuing from class to class so that folds
// differ in size by one at most and hold each class in proportion.
func foldsOf(d Dataset, n int) []int {
	label := d.Label
	if label == nil {
		label = func(int) int { return 0 }
	}
	byClass := map[int][]int{}
	for i := range d.Len {
		byClass[label(i)] = append(byClass[label(i)], i)
	}
	classes := slices.Sorted(func(yield func(int) bool) {
		for c := range byClass {
			if !yield(c) {
				return
			}
		}
	})
	folds := make([]int, d.Len)
	next := 0
	for _, c := range classes {
		members := byClass[c]
		rng := rand.New(rand.NewPCG(d.Seed, uint64(c)^0x466f6c6473))
		rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		for _, i := range members {
			folds[i] = next % n
			next++
		}
	}
	return folds
}

// classSubset is the samples of the named classes.
func classSubset(names []string, d Dataset) (*Subset, error) {
	if len(names) == 0 {
		return nil, badSubset("classes: name at least one")
	}
	if d.Label == nil {
		return nil, badSubset("classes: this mount's samples have no labels")
	}
	want := map[int]bool{}
	for _, name := range names {
		label := slices.Index(d.Classes, name)
		if label < 0 {
			n, err := strconv.Atoi(name)
			if err != nil || n < 0 || n >= len(d.Classes) {
				return nil, badSubset("classes: no class %q (%d classes: names, or labels 0 to %d)", name, len(d.Classes), len(d.Classes)-1)
			}
			label = n
		}
		want[label] = true
	}
	form := "classes " + strings.Join(names, " ")
	return NewSubset(form, d.Len, func(i int) bool { return want[d.Label(i)] })
}

// textList is an explicit list, one dataset index a line.
func textList(s []byte, d Dataset) (*Subset, error) {
	in := make([]bool, d.Len)
	count := 0
	for line := range bytes.SplitSeq(s, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		i, err := atoi(line)
		if err != nil {
			return nil, badSubset("%s is neither all, fold, holdout, classes nor a dataset index", truncate(string(line[:min(len(line), 64)])))
		}
		if err := mark(in, i, d.Len); err != nil {
			return nil, err
		}
		count++
	}
	return NewSubset(fmt.Sprintf("list of %d", count), d.Len, func(i int) bool { return in[i] })
}

// atoi is strconv.Atoi of a line, with no copy of a long one (no index
// has more than 19 digits).
func atoi(b []byte) (int, error) {
	if len(b) > 20 {
		return 0, strconv.ErrRange
	}
	return strconv.Atoi(string(b))
}

// binaryList is an explicit list of little-endian int64 indices.
func binaryList(b []byte, d Dataset) (*Subset, error) {
	if len(b)%8 != 0 {
		return nil, badSubset("binary list of %d bytes: want little-endian int64s (a multiple of 8 bytes)", len(b))
	}
	in := make([]bool, d.Len)
	for k := 0; k < len(b); k += 8 {
		i := int64(binary.LittleEndian.Uint64(b[k:]))
		if i < 0 || i >= int64(d.Len) {
			return nil, badSubset("index %d out of range: the dataset has %d samples", i, d.Len)
		}
		if err := mark(in, int(i), d.Len); err != nil {
			return nil, err
		}
	}
	return NewSubset(fmt.Sprintf("list of %d", len(b)/8), d.Len, func(i int) bool { return in[i] })
}

// mark puts index i in the list in, refusing one out of range or seen.
func mark(in []bool, i, size int) error {
	switch {
	case i < 0 || i >= size:
		return badSubset("index %d out of range: the dataset has %d samples", i, size)
	case in[i]:
		return badSubset("index %d twice", i)
	}
	in[i] = true
	return nil
}

// truncate keeps a message about bad input short and printable.
func truncate(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strconv.Quote(s)
}
