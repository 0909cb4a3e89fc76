package batchstore

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// dataset is 20 samples of 4 classes, labels i%4.
var dataset = Dataset{Len: 20, Label: func(i int) int { return i % 4 }, Classes: []string{"cat", "dog", "owl", "yak"}, Seed: 7}

func TestParseSubset(t *testing.T) {
	bin := make([]byte, 16)
	binary.LittleEndian.PutUint64(bin, 3)
	binary.LittleEndian.PutUint64(bin[8:], 19)
	for _, tc := range []struct {
		text, form string
		count      int
	}{
		{"all\n", "all", 20},
		{"fold 2/5\n", "fold 2/5", 16},
		{"holdout 2/5", "holdout 2/5", 4},
		{"classes dog yak\n", "classes dog yak", 10},
		{"classes 0\n", "classes 0", 5},
		{"3\n7\n19\n", "list of 3", 3},
		{string(bin), "list of 2", 2},
	} {
		sub, err := ParseSubset([]byte(tc.text), dataset)
		if err != nil || sub.Form() != tc.form || (sub != nil && sub.Len() != tc.count) {
			t.Errorf("%q: %s (%d) %v", tc.text, sub.Form(), sub.Len(), err)
		}
	}
	for text, want := range map[string]string{
		"":                       "empty",
		"fold 6/5":               "K must be 1 to 5",
		"fold 0/0":               "N must be 2",
		"fold 1/21":              "N must be 2 to the dataset's 20",
		"fold x":                 "want K/N",
		"classes":                "name at least one",
		"classes emu":            `no class "emu"`,
		"3\n3\n":                 "index 3 twice",
		"20\n":                   "index 20 out of range",
		"-1\n":                   "index -1 out of range",
		"junk words":             `"junk words" is neither`,
		"all of it":              "all takes nothing",
		"\x00\x01":               "a multiple of 8 bytes",
		strings.Repeat("1\n", 2): "index 1 twice",
	} {
		if _, err := ParseSubset([]byte(text), dataset); err == nil || !errors.Is(err, ErrBadSubset) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}

// TestFoldsPartitionStratified: the N folds of K/N split the dataset,
// each sample in one holdout, each class spread evenly; the training
// part is the rest; the same seed gives the same folds, another another.
func TestFoldsPartitionStratified(t *testing.T) {
	seen := make([]int, dataset.Len)
	for k := 1; k <= 5; k++ {
		hold, _ := ParseSubset([]byte("holdout "+string(rune('0'+k))+"/5"), dataset)
		train, _ := ParseSubset([]byte("fold "+string(rune('0'+k))+"/5"), dataset)
		perClass := map[int]int{}
		for i := range dataset.Len {
			if hold.Has(i) == train.Has(i) {
				t.Fatalf("fold %d: sample %d in both or neither part", k, i)
			}
			if hold.Has(i) {
				seen[i]++
				perClass[i%4]++
			}
		}
		for c, n := range perClass {
			if n != 1 {
				t.Fatalf("holdout %d/5 holds %d of class %d's 5 samples, want 1", k, n, c)
			}
		}
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("sample %d in %d holdouts", i, n)
		}
	}
	other := dataset
	other.Seed = 8
	a, _ := ParseSubset([]byte("holdout 1/5"), dataset)
	b, _ := ParseSubset([]byte("holdout 1/5"), dataset)
	c, _ := ParseSubset([]byte("holdout 1/5"), other)
	if !a.within(b) || !b.within(a) || (a.within(c) && c.within(a)) {
		t.Fatal("folds do not follow the seed")
	}
}

// FuzzParseSubset: any bytes parse without a panic into a subset of the
// dataset, or an ErrBadSubset.
func FuzzParseSubset(f *testing.F) {
	for _, s := range []string{"all", "fold 2/5", "holdout 5/5", "classes dog 3", "1\n2\n", "\x01\x00\x00\x00\x00\x00\x00\x00", "fold 9999999999999999999/2"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		sub, err := ParseSubset(text, dataset)
		if err != nil && !errors.Is(err, ErrBadSubset) {
			t.Fatalf("%q: %v", text, err)
		}
		if err == nil && sub != nil && (sub.Len() < 1 || sub.Len() > dataset.Len) {
			t.Fatalf("%q: %d samples", text, sub.Len())
		}
	})
}
