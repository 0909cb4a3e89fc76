package main

import (
	"context"
	"os"
	"strings"
	"testing"
)

// The flag reference in docs/reference.md is `tsock mount --help`,
// verbatim, between these lines.
const (
	helpBegin = "<!-- begin: tsock mount --help (generated; TSOCK_UPDATE_DOCS=1 go test ./cmd/tsock -run TestReferenceIsTheMountHelp rewrites it) -->\n```text\n"
	helpEnd   = "```\n<!-- end: tsock mount --help -->\n"
	reference = "../../docs/reference.md"
)

// TestReferenceIsTheMountHelp: the documented flags are the binary's own,
// so that a flag added, renamed or re-described cannot leave the
// reference behind.
func TestReferenceIsTheMountHelp(t *testing.T) {
	help, _, code := tsockRun(context.Background(), "mount", "--help")
	if code != 0 || !strings.Contains(help, "--source") {
		t.Fatalf("tsock mount --help: exit %d, %q", code, help)
	}
	b, err := os.ReadFile(reference)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	from, to := strings.Index(doc, helpBegin), strings.Index(doc, helpEnd)
	if from < 0 || to < from {
		t.Fatalf("%s has no block between %q and %q", reference, helpBegin, helpEnd)
	}
	got := doc[from+len(helpBegin) : to]
	if got == help {
		return
	}
	if os.Getenv("TSOCK_UPDATE_DOCS") != "" {
		if err := os.WriteFile(reference, []byte(doc[:from+len(helpBegin)]+help+doc[to:]), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the flag reference in %s", reference)
		return
	}
	gotLines, wantLines := strings.Split(got, "\n"), strings.Split(help, "\n")
	for k := range max(len(gotLines), len(wantLines)) {
		g, w := "", ""
		if k < len(gotLines) {
			g = gotLines[k]
		}
		if k < len(wantLines) {
			w = wantLines[k]
		}
		if g != w {
			t.Fatalf("%s differs from tsock mount --help at line %d of the block:\n doc:  %q\n help: %q\nrun TSOCK_UPDATE_DOCS=1 go test ./cmd/tsock -run TestReferenceIsTheMountHelp", reference, k+1, g, w)
		}
	}
}
