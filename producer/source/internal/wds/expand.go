package wds

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxShards bounds the names a shard spec may expand to.
const MaxShards = 1 << 20

// Expand expands a shard spec's braces as WebDataset (braceexpand) does:
// "train-{000000..000002}.tar" is three names, zero-padded to the wider
// bound when either bound has a leading zero; "{a,b}" is a list; several
// braces multiply, left to right. A spec without braces is itself.
func Expand(spec string) ([]string, error) {
	open := strings.IndexByte(spec, '{')
	if open < 0 {
		if strings.IndexByte(spec, '}') >= 0 {
			return nil, fmt.Errorf("shard spec %q: a '}' without its '{'", printable(spec))
		}
		return []string{spec}, nil
	}
	end := strings.IndexByte(spec[open:], '}')
	if end < 0 {
		return nil, fmt.Errorf("shard spec %q: a '{' without its '}'", printable(spec))
	}
	end += open
	alts, err := alternatives(spec[open+1 : end])
	if err != nil {
		return nil, fmt.Errorf("shard spec %q: %w", printable(spec), err)
	}
	rest, err := Expand(spec[end+1:])
	if err != nil {
		return nil, err
	}
	if len(alts) > MaxShards/max(len(rest), 1) {
		return nil, fmt.Errorf("shard spec %q: more than %d names", printable(spec), MaxShards)
	}
	out := make([]string, 0, len(alts)*len(rest))
	for _, a := range alts {
		for _, r := range rest {
			out = append(out, spec[:open]+a+r)
		}
	}
	return out, nil
}

// alternatives is one brace's contents: "A..B" (whole numbers) or a list.
func alternatives(body string) ([]string, error) {
	if strings.ContainsRune(body, '{') {
		return nil, fmt.Errorf("nested braces")
	}
	lo, hi, ok := strings.Cut(body, "..")
	if !ok {
		return strings.Split(body, ","), nil
	}
	a, errA := strconv.ParseUint(lo, 10, 63)
	b, errB := strconv.ParseUint(hi, 10, 63)
	if errA != nil || errB != nil || b < a {
		return nil, fmt.Errorf("range {%s}: want {A..B}, whole numbers, A <= B", printable(body))
	}
	if b-a >= MaxShards {
		return nil, fmt.Errorf("range {%s}: more than %d names", printable(body), MaxShards)
	}
	width := 0
	if (len(lo) > 1 && lo[0] == '0') || (len(hi) > 1 && hi[0] == '0') {
		width = max(len(lo), len(hi))
	}
	out := make([]string, 0, b-a+1)
	for n := a; n <= b; n++ {
		out = append(out, fmt.Sprintf("%0*d", width, n))
	}
	return out, nil
}
