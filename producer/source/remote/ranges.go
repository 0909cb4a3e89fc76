package remote

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// A ranged GET is answered 206 with the Content-Range asked for, or, by a
// server or gateway that ignores Range (HTTP allows it), 200 with the
// whole object. tsock serves only the bytes it asked for: a 206 must
// name exactly the range asked, and a 200's body is read up to the
// range's first byte and cut at its last. Anything else is a fault of
// the store's, retried as any other, never bytes served.

// errWrongRange: a 206 whose Content-Range is not the range asked for.
var errWrongRange = errors.New("the store answered another range than the one asked for")

// inRange checks the answer to a GET of bytes from..to (to -1: to the
// end) whose Content-Range header is contentRange ("" for a 200), and
// fits w's body to the range: a 200's leading bytes are read and
// dropped, its trailing ones never read.
func (s *Store) inRange(w *watched, contentRange string, from, to int64) error {
	if contentRange != "" {
		start, end, total, ok := parseContentRange(contentRange)
		if !ok || start != from || (to >= 0 && end != to) || (to < 0 && total >= 0 && end != total-1) {
			return fmt.Errorf("%w: asked bytes %d-%s, answered %q", errWrongRange, from, rangeEnd(to), contentRange)
		}
		return nil
	}
	s.Stats.WholeForRange.Add(1)
	skipped, err := io.CopyN(io.Discard, w, from)
	s.Stats.Discarded.Add(skipped)
	if err != nil {
		// A body that ends before the range begins: cut short, or an
		// object smaller than the range (a retry says which).
		return fmt.Errorf("a range from byte %d answered with the whole object, which ended at byte %d: %w", from, skipped, io.ErrUnexpectedEOF)
	}
	if to >= 0 {
		w.left = to - from + 1
	}
	return nil
}

func rangeEnd(to int64) string {
	if to < 0 {
		return ""
	}
	return strconv.FormatInt(to, 10)
}

// parseContentRange reads "bytes START-END/TOTAL" (TOTAL may be "*":
// -1); ok is false for anything else.
func parseContentRange(v string) (start, end, total int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(v), "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	span, size, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(span, "-")
	if !found {
		return 0, 0, 0, false
	}
	// Digits only (RFC 9110: no sign, no space): ParseUint of 63 bits
	// refuses "-10" and "+5" alike, and anything past an int64.
	num := func(d string) (int64, bool) {
		n, err := strconv.ParseUint(d, 10, 63)
		return int64(n), err == nil
	}
	start, ok1 := num(a)
	end, ok2 := num(b)
	total, ok3 := int64(-1), true
	if size != "*" {
		total, ok3 = num(size)
	}
	if !ok1 || !ok2 || !ok3 || end < start || (total >= 0 && end >= total) {
		return 0, 0, 0, false
	}
	return start, end, total, true
}
