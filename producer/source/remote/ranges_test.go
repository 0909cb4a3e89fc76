package remote

import (
	"strings"
	"testing"
)

// TestParseContentRange: what a 206 may say, and what it may not.
func TestParseContentRange(t *testing.T) {
	for _, tc := range []struct {
		in                string
		start, end, total int64
		ok                bool
	}{
		{"bytes 0-99/1000", 0, 99, 1000, true},
		{"bytes 900-999/1000", 900, 999, 1000, true},
		{"bytes 5-5/*", 5, 5, -1, true},
		{"bytes 900-1000/1000", 0, 0, 0, false}, // past the end
		{"bytes 0-0/-10", 0, 0, 0, false},       // a negative size (the fuzzer's find)
		{"bytes 0-5/-1", 0, 0, 0, false},        // not "*"
		{"bytes +0-5/10", 0, 0, 0, false},       // a sign
		{"bytes 10-9/100", 0, 0, 0, false},
		{"bytes */1000", 0, 0, 0, false},
		{"items 0-1/2", 0, 0, 0, false},
		{"bytes -1-5/10", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	} {
		start, end, total, ok := parseContentRange(tc.in)
		if ok != tc.ok || (ok && (start != tc.start || end != tc.end || total != tc.total)) {
			t.Errorf("%q: %d-%d/%d %v", tc.in, start, end, total, ok)
		}
	}
}

// FuzzContentRange: any header parses to a range inside its object, or
// is refused; never a panic.
func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-99/1000", "bytes 5-5/*", "bytes 1-0/1", "bytes 9223372036854775807-9223372036854775807/*", "bytes 0-0/-10", "bytes +0-5/10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start, end, total, ok := parseContentRange(s)
		if !ok {
			return
		}
		if start < 0 || end < start || (total >= 0 && end >= total) || total < -1 || (total == -1 && !strings.HasSuffix(s, "/*")) {
			t.Fatalf("%q parsed to %d-%d/%d", s, start, end, total)
		}
	})
}
