package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsock/tsock/fs/fusetest"
	"github.com/tsock/tsock/producer/producertest"
)

// runCLI runs a tsock command line in-process: its exit code, and its
// standard output and error together.
func runCLI(t *testing.T, args ...string) (int, string) {
	t.Helper()
	stdout, stderr, code := tsockRun(context.Background(), args...)
	return code, stdout + stderr
}

// tsockRun runs a tsock command line in-process and returns its stdout,
// stderr and exit code.
func tsockRun(ctx context.Context, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = run(ctx, args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestBadFlagsExit2WithUsage(t *testing.T) {
	mp := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mount", mp, "--source", "synthetic:10", "--batch-size", "0"}, "--batch-size 0"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--buffer", "lots"}, `--buffer "lots"`},
		{[]string{"mount", mp, "--source", "synthetic:10", "--buffer", "0"}, "--buffer"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--image-size", "-3"}, "--image-size"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--epochs", "-1"}, "--epochs"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--layout", "chw"}, "layout"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--transform", "x"}, "transform"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--workers", "-1"}, "--workers"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--storage", "disk"}, "--storage"},
		{[]string{"mount", mp, "--source", mp, "--cache", "lots"}, `--cache "lots"`},
		{[]string{"mount", mp, "--source", "synthetic:10", "--cache", "1GiB"}, "no files to cache"},
		{[]string{"mount", mp, "--source", mp, "--cache-dir", mp}, "needs --cache"},
		{[]string{"mount", mp, "--source", mp, "--shard-index", mp + "/idx"}, "--shard-index " + mp + "/idx: for tar shards only"},
		{[]string{"mount", mp, "--source", mp + "/x.tar", "--shard-index", mp + "/nowhere/idx"}, "its directory does not exist"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--rescan"}, "--rescan: only a local folder"},
		{[]string{"mount", mp, "--source", mp, "--keep", "1GiB"}, "only --transform eval"},
		{[]string{"mount", mp, "--source", mp, "--transform", "eval", "--keep", "lots"}, `--keep "lots"`},
		{[]string{"mount", mp, "--ingest", "--rescan"}, "--rescan is for the built-in pipeline"},
		{[]string{"mount", mp, "--source", mp, "--cache", "1GiB", "--cache-dir", mp + "/nowhere"}, "not a directory"},
		{[]string{"mount", mp, "--source", mp + "/x.tar", "--shard-memory", "1PiB"}, "--shard-memory 1PiB: over half this machine's memory"},
		{[]string{"mount", mp, "--source", mp + "/x.tar", "--shard-disk", "lots"}, `--shard-disk "lots"`},
		{[]string{"mount", mp, "--source", "synthetic:10", "--s3-retry-for", "-1s"}, "--s3-retry-for -1s"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--fetch", "-1"}, `--fetch "-1"`},
		{[]string{"mount", mp, "--source", "synthetic:10", "--fetch", "1025"}, `--fetch "1025"`},
		{[]string{"mount", mp, "--source", "synthetic:10", "--fetch", "9223372036854775808"}, "--fetch"},
		{[]string{"mount", mp, "--ingest", "--fetch", "8"}, "--fetch is for the built-in pipeline"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--device", "gpu0"}, "--device"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--gpu-buffer", "1GiB"}, "needs --device"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--device", "cuda:0", "--gpu-buffer", "lots"}, "--gpu-buffer"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--batch-size", "many"}, "batch-size"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--no-such-flag"}, "no-such-flag"},
		{[]string{"mount", mp}, "--source DIR or --ingest is required"},
		{[]string{"mount", "--source", "synthetic:10"}, "one MOUNTPOINT"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{}, "usage: tsock"},
		{[]string{"gendata", mp, "--quality", "0"}, "--quality"},
		// Integers at their limits: refused before any arithmetic on them.
		{[]string{"mount", mp, "--source", "synthetic:10", "--batch-size", "4611686018427387904"}, "--batch-size"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--batch-size", "9223372036854775807"}, "--batch-size"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--batch-size", "9223372036854775808"}, "batch-size"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--consumer-timeout", "1ns"}, "--consumer-timeout 1ns"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--consumer-timeout", "3ns"}, "--consumer-timeout 3ns"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--consumer-timeout", "-5s"}, "--consumer-timeout"},
		{[]string{"mount", mp, "--source", "synthetic:10", "--workers", "1000000000"}, "--workers"},
		{[]string{"mount", mp, "--ingest", "--samples", "4611686018427387904"}, "--samples"},
		{[]string{"mount", mp, "--ingest", "--samples", "-1"}, "--samples"},
	} {
		code, out := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(out, tc.want) || !strings.Contains(out, "usage:") {
			t.Errorf("tsock %v: exit %d, output %q; want exit 2 with %q and usage", tc.args, code, out, tc.want)
		}
	}
}

// TestHelpExits0: help asked for is on stdout (tsock mount --help | less),
// exit 0.
func TestHelpExits0(t *testing.T) {
	for _, args := range [][]string{{"mount", "--help"}, {"--help"}, {"status", "-h"}} {
		stdout, stderr, code := tsockRun(context.Background(), args...)
		if code != exitOK || !strings.Contains(stdout, "usage: tsock") || stderr != "" {
			t.Fatalf("tsock %v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

func TestRuntimeErrorsExit1(t *testing.T) {
	fusetest.Need(t)
	mp := t.TempDir()
	src := producertest.Folder(t, 4, 2)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mount", mp, "--source", "/nonexistent/data"}, "/nonexistent/data"},
		{[]string{"mount", mp, "--source", t.TempDir()}, "no image files"},
		{[]string{"mount", mp, "--source", src, "--buffer", "1MiB"}, "smaller than one batch"},
		{[]string{"mount", filepath.Join(mp, "missing"), "--source", src}, "missing"},
		{[]string{"mount", file, "--source", src}, "not a directory"},
	} {
		code, out := runCLI(t, tc.args...)
		if code != exitError || !strings.Contains(out, tc.want) {
			t.Errorf("tsock %v: exit %d, output %q; want exit 1 with %q", tc.args, code, out, tc.want)
		}
	}
	if fusetest.Mounted(t, mp) {
		t.Fatal("a failed mount left a mount behind")
	}
}

// A size of 0 means off whatever its unit: --cache 0MiB is --cache 0,
// --keep 0B is --keep 0 (each was refused while flags were kept as text
// and compared with "0"); sizes are parsed once, at the flag.
func TestZeroSizesMeanOff(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args       []string
		cache      int64
		keep       int64
		fetch      int
		cacheDirOK bool
	}{
		{[]string{"--cache", "0"}, 0, 0, 0, false},
		{[]string{"--cache", "0MiB"}, 0, 0, 0, false},
		{[]string{"--cache", "0B"}, 0, 0, 0, false},
		{[]string{"--cache", "1KiB"}, 1024, 0, 0, true},
		{[]string{"--transform", "eval"}, 0, 64 << 20, 0, false},
		{[]string{"--transform", "eval", "--keep", "0"}, 0, 0, 0, false},
		{[]string{"--transform", "eval", "--keep", "0B"}, 0, 0, 0, false},
		{[]string{"--transform", "eval", "--keep", "1MiB"}, 0, 1 << 20, 0, false},
		{[]string{"--keep", "0MiB"}, 0, 0, 0, false},
		{[]string{"--fetch", "3"}, 0, 0, 3, false},
	} {
		c := &mountCommand{}
		if err := c.Parse(append([]string{"/mnt/x", "--source", dir, "--buffer", "64MiB"}, tc.args...)); err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if c.cacheSize != tc.cache || c.cfg.Keep != tc.keep || c.cfg.Fetch != tc.fetch {
			t.Errorf("%v: cache %d, keep %d, fetch %d; want %d, %d, %d", tc.args, c.cacheSize, c.cfg.Keep, c.cfg.Fetch, tc.cache, tc.keep, tc.fetch)
		}
		c = &mountCommand{}
		err := c.Parse(append([]string{"/mnt/x", "--source", dir, "--cache-dir", dir}, tc.args...))
		if (err == nil) != tc.cacheDirOK {
			t.Errorf("%v --cache-dir: %v; want accepted only with a cache", tc.args, err)
		}
	}
	c := &mountCommand{}
	if err := c.Parse([]string{"/mnt/x", "--source", "s3://bucket/data/"}); err != nil || c.cfg.Fetch != defaultRemoteFetch {
		t.Errorf("--fetch auto for s3://: %d, %v; want %d", c.cfg.Fetch, err, defaultRemoteFetch)
	}
}

// No secret in any output, whatever the input: credentials in --source
// or in an --s3-endpoint that does not parse are never printed (before,
// both were, the source twice).
func TestNoSecretInAnyOutput(t *testing.T) {
	mp := t.TempDir()
	for _, args := range [][]string{
		{"mount", mp, "--source", "s3://AKIDLEAK:s3kr1tLEAK@bucket/train/"},
		{"mount", mp, "--source", "s3://AKIDLEAK:s3kr/1tLEAK@bucket/train/x.tar"},
		{"mount", mp, "--source", "s3://AKIDLEAK:s3kr1tLEAK@bucket/train/", "--rescan"},
		{"mount", mp, "--source", "s3://bucket/train/", "--s3-endpoint", "http://AKIDLEAK:s3kr1tLEAK@127.0.0.1:99999"},
		{"mount", mp, "--source", "s3://bucket/train/", "--s3-endpoint", "http://AKIDLEAK:s3%kr1tLEAK@[::1:9000"},
	} {
		code, out := runCLI(t, args...)
		if code == exitOK || strings.Contains(out, "LEAK") || strings.Contains(out, "s3kr") {
			t.Errorf("tsock %v: exit %d, output %q: want a refusal that shows no credentials", args, code, out)
		}
	}
}
