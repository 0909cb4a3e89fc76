package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
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

// TestDocsLinksResolve: every relative link in README.md and docs/ names
// a file that exists and, with a #fragment, a heading in it (GitHub's
// anchors), so that moving a section cannot leave a dead link.
func TestDocsLinksResolve(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	anchors := map[string]map[string]bool{}
	heading := regexp.MustCompile(`(?m)^#+ (.*)$`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		anchors[filepath.Clean(f)] = map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(string(b), -1) {
			anchors[filepath.Clean(f)][githubAnchor(m[1])] = true
		}
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	code := regexp.MustCompile("(?s)```.*?```")
	checked := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(string(b), ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := filepath.Clean(f)
			if path != "" {
				file = filepath.Clean(filepath.Join(filepath.Dir(f), path))
			}
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s: link %s: no such file", f, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(file, ".md") && !anchors[file][anchor] {
				t.Errorf("%s: link %s: no such heading in %s", f, target, file)
			}
			checked++
		}
	}
	if checked < 40 {
		t.Fatalf("only %d links checked: the pattern misses them", checked)
	}
}

// githubAnchor is the fragment GitHub gives a heading: lower case, spaces
// to hyphens, punctuation dropped.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
