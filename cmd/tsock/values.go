package main

import (
	"fmt"
	"strconv"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"
)

// Flag values: each flag is parsed once, as pflag sets it, into the typed
// field it fills; a bad value is refused there, naming the flag, and the
// command never sees it as text again.

// flagValueError is a value refused by one of these types: its message
// already names the flag and the value, so parseFlags shows it alone
// rather than under pflag's "invalid argument" wrapper.
type flagValueError struct{ error }

func (e flagValueError) Unwrap() error { return e.error }

func refuse(format string, args ...any) error { return flagValueError{fmt.Errorf(format, args...)} }

// maxSize bounds every size flag: far above any machine, low enough that
// no arithmetic on it overflows.
const maxSize = 1 << 50

// sizeValue is a byte count: "4GiB", "512MB", "1000000000"; 0 in any unit ("0",
// "0B", "0MiB") means off where the flag allows it (zeroOK).
type sizeValue struct {
	name   string
	n      *int64
	zeroOK bool
	text   string
}

func newSize(f *pflag.FlagSet, n *int64, name, def string, zeroOK bool, usage string) *sizeValue {
	v := &sizeValue{name: name, n: n, zeroOK: zeroOK}
	if def != "" {
		if err := v.Set(def); err != nil {
			panic(err) // a default in the source that does not parse
		}
	}
	f.Var(v, name, usage)
	return v
}

func (v *sizeValue) Set(s string) error {
	n, err := parseBytes(v.name, s)
	if err != nil {
		return err
	}
	if n == 0 && !v.zeroOK {
		return refuse("--%s %q: must be between 1 byte and 1 PiB", v.name, s)
	}
	*v.n, v.text = n, s
	return nil
}

func (v *sizeValue) String() string { return v.text }
func (v *sizeValue) Type() string   { return "size" }

// parseBytes reads a size of at most maxSize.
func parseBytes(name, s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, refuse("--%s %q: not a size (try 2GiB or 512MiB)", name, s)
	}
	if n > maxSize {
		return 0, refuse("--%s %q: must be between 1 byte and 1 PiB", name, s)
	}
	return int64(n), nil
}

// autoSize is "auto" or a size (0 in any unit: none).
type autoSize struct {
	name string
	auto *bool
	n    *int64
	text string
}

func newAutoSize(f *pflag.FlagSet, auto *bool, n *int64, name, usage string) {
	*auto = true
	f.Var(&autoSize{name: name, auto: auto, n: n, text: "auto"}, name, usage)
}

func (v *autoSize) Set(s string) error {
	if s == "auto" {
		*v.auto, *v.n, v.text = true, 0, s
		return nil
	}
	n, err := parseBytes(v.name, s)
	if err != nil {
		return err
	}
	*v.auto, *v.n, v.text = false, n, s
	return nil
}

func (v *autoSize) String() string { return v.text }
func (v *autoSize) Type() string   { return "auto|size" }

// autoCount is "auto" or a whole number from 0 to max.
type autoCount struct {
	name string
	auto *bool
	n    *int
	max  int
	text string
}

func newAutoCount(f *pflag.FlagSet, auto *bool, n *int, max int, name, usage string) {
	*auto = true
	f.Var(&autoCount{name: name, auto: auto, n: n, max: max, text: "auto"}, name, usage)
}

func (v *autoCount) Set(s string) error {
	if s == "auto" {
		*v.auto, *v.n, v.text = true, 0, s
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > v.max {
		return refuse("--%s %q: want auto or 0 to %d", v.name, s, v.max)
	}
	*v.auto, *v.n, v.text = false, n, s
	return nil
}

func (v *autoCount) String() string { return v.text }
func (v *autoCount) Type() string   { return "auto|N" }

// parsed is a value that its package parses (a layout, a transform, a
// straggler policy, a GPU): the package's own parser, its own words.
type parsed[T any] struct {
	name  string
	p     *T
	parse func(string) (T, error)
	text  string
}

func newParsed[T any](f *pflag.FlagSet, p *T, parse func(string) (T, error), name, def, usage string) {
	v := &parsed[T]{name: name, p: p, parse: parse}
	if def != "" {
		if err := v.Set(def); err != nil {
			panic(err)
		}
	}
	f.Var(v, name, usage)
}

func (v *parsed[T]) Set(s string) error {
	t, err := v.parse(s)
	if err != nil {
		return refuse("--%s: %w", v.name, err)
	}
	*v.p, v.text = t, s
	return nil
}

func (v *parsed[T]) String() string { return v.text }
func (v *parsed[T]) Type() string   { return "string" }

// oneOf is a parser that takes one of the words given.
func oneOf(words ...string) func(string) (string, error) {
	return func(s string) (string, error) {
		for _, w := range words {
			if s == w {
				return s, nil
			}
		}
		return "", fmt.Errorf("%q: want %s", s, orList(words))
	}
}

// orList is "a, b or c".
func orList(words []string) string {
	if len(words) == 1 {
		return words[0]
	}
	s := words[0]
	for _, w := range words[1 : len(words)-1] {
		s += ", " + w
	}
	return s + " or " + words[len(words)-1]
}
