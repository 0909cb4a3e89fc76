package remote

import (
	"strings"
	"testing"
)

// Redaction fails closed: an endpoint with credentials that does not
// parse as a URL (a bad port, a stray '%', an unclosed '[', a space, a
// secret with '/') still shows none of them, in Redact and in Dial's
// error. Before, such an endpoint was printed whole.
func TestRedactionFailsClosed(t *testing.T) {
	for _, endpoint := range []string{
		"http://KEY:SECRET@127.0.0.1:99999",
		"http://KEY:SE%CRET@127.0.0.1:9000",
		"http://KEY:SECRET@[::1:9000",
		"http://KEY:SECRET@127.0.0.1:9000 /x",
		"https://KEY:SEC/RET@host.example/",
		"KEY:SECRET@host.example",
		"http://KEY:SECRET@",
		"http://KEY:SEC@RET@host",
	} {
		shown := Redact(endpoint)
		for _, part := range []string{"KEY", "SECRET", "SEC", "RET"} {
			if strings.Contains(shown, part) {
				t.Errorf("Redact(%q) = %q: shows %q", endpoint, shown, part)
			}
		}
		cfg := DefaultConfig()
		cfg.Endpoint = endpoint
		if _, err := Dial(cfg); err != nil && (strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "KEY:")) {
			t.Errorf("Dial(%q): %v", endpoint, err)
		}
	}
	if got := Redact("http://127.0.0.1:9000/a@b"); got != "http://REDACTED@b" {
		t.Errorf("an '@' past the host is cut too (closed, not parsed): %q", got)
	}
}

// FuzzRedact: whatever stands before the last '@' after the scheme never
// shows.
func FuzzRedact(f *testing.F) {
	f.Add("http", "KEY:SECRET", "127.0.0.1:99999")
	f.Add("", "a/b%c[d e", "[::1")
	f.Fuzz(func(t *testing.T, scheme, user, rest string) {
		if user == "" || strings.Contains(rest, "@") || strings.ContainsAny(scheme, "@/") || strings.Contains(scheme, "://") ||
			(scheme == "" && strings.Contains(user, "://")) {
			return
		}
		prefix := ""
		if scheme != "" {
			prefix = scheme + "://"
		}
		shown := Redact(prefix + user + "@" + rest)
		if shown != prefix+"REDACTED@"+rest {
			t.Fatalf("Redact(%q) = %q", prefix+user+"@"+rest, shown)
		}
	})
}
