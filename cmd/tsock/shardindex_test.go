package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShardIndexDefaultsToTheCacheDir: without --shard-index, tar shards
// get an index file of their own in the user's cache directory: the same
// for the same shards (a relative local spec made absolute), another for
// other shards or another endpoint; none keeps none; a folder gets none.
func TestShardIndexDefaultsToTheCacheDir(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	data := t.TempDir()
	t.Chdir(filepath.Dir(data))
	index := func(args ...string) string {
		t.Helper()
		c := &mountCommand{}
		if err := c.Parse(append([]string{"/mnt/x"}, args...)); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return c.shardIndex
	}
	s3 := index("--source", "s3://b/train-{0..9}.tar", "--s3-endpoint", "http://127.0.0.1:9000")
	if filepath.Dir(s3) != filepath.Join(cache, "tsock", "shard-index") || !strings.HasSuffix(s3, ".idx") {
		t.Fatalf("default index %q: want a .idx file in %s/tsock/shard-index", s3, cache)
	}
	for _, tc := range []struct {
		args []string
		same bool
	}{
		{[]string{"--source", "s3://b/train-{0..9}.tar", "--s3-endpoint", "http://127.0.0.1:9000"}, true},
		{[]string{"--source", "s3://b/train-{0..8}.tar", "--s3-endpoint", "http://127.0.0.1:9000"}, false},
		{[]string{"--source", "s3://b/train-{0..9}.tar", "--s3-endpoint", "http://127.0.0.1:9001"}, false},
	} {
		if got := index(tc.args...); (got == s3) != tc.same {
			t.Errorf("%v: index %q beside %q; want the same file: %v", tc.args, got, s3, tc.same)
		}
	}
	rel, abs := index("--source", filepath.Join(filepath.Base(data), "s-{0..3}.tar")), index("--source", filepath.Join(data, "s-{0..3}.tar"))
	if rel != abs || rel == "" || rel == s3 {
		t.Errorf("local shards: %q by a relative spec, %q by the absolute one; want one file of their own", rel, abs)
	}
	for _, args := range [][]string{
		{"--source", "s3://b/train-{0..9}.tar", "--shard-index", "none"},
		{"--source", data},
		{"--source", "s3://b/imagefolder/"},
	} {
		if got := index(args...); got != "" {
			t.Errorf("%v: index %q, want none", args, got)
		}
	}
	if got := index("--source", "s3://b/t.tar", "--shard-index", filepath.Join(data, "i")); got != filepath.Join(data, "i") {
		t.Errorf("--shard-index FILE: %q", got)
	}
	if _, err := os.Stat(filepath.Join(cache, "tsock")); !os.IsNotExist(err) {
		t.Errorf("parsing made the cache directory: %v", err)
	}
	// No cache directory at all: none is kept, and status says why.
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	c := &mountCommand{}
	if err := c.Parse([]string{"/mnt/x", "--source", "s3://b/train-{0..9}.tar"}); err != nil {
		t.Fatal(err)
	}
	if c.shardIndex != "" || !strings.Contains(c.noIndex, "$HOME unset") {
		t.Errorf("$HOME unset: index %q, status says %q; want none, and why", c.shardIndex, c.noIndex)
	}
}
