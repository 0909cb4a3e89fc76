package source_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// TestARangedReadServesOnlyTheBytesAsked: shards read a sample at a time
// (a ranged GET each) from a server that ignores Range (200 and the
// whole object), and from one that answers another range than the one
// asked for (every third request): the batches are the local folder's,
// byte for byte. A 200's range is cut out of its body and counted; a
// wrong Content-Range is a fault, tried again, never served. (Before:
// another image's bytes served as a sample, good ones skipped as
// corrupt.)
func TestARangedReadServesOnlyTheBytesAsked(t *testing.T) {
	server := s3test.Start(t, "data")
	dir := producertest.Folder(t, 24, 3)
	spec := uploadShards(t, server, "data", producertest.Shards(t, dir, 8))
	folder, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		fault func(n int) s3test.Fault
		says  string
	}{
		{"a server that ignores Range", func(int) s3test.Fault { return s3test.IgnoreRange }, "ranges answered with the whole object"},
		{"a server that answers another range", func(n int) s3test.Fault {
			if n%3 == 0 {
				return s3test.ShiftRange
			}
			return s3test.Pass
		}, " retried"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := s3test.StartProxy(t, server, tc.fault)
			src, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(proxy.Endpoint), Shards: &source.ShardSpace{Memory: 0, Batch: 8}})
			if err != nil {
				t.Fatal(err)
			}
			sameBatches(t, folder, src)
			remote := src.(*source.Shards).Remote()
			if !strings.Contains(remote, tc.says) || strings.Contains(remote, " 0 retried") == (tc.says == " retried") {
				t.Fatalf("status says %q, want %q", remote, tc.says)
			}
			if n := proxy.Injected[s3test.IgnoreRange].Load() + proxy.Injected[s3test.ShiftRange].Load(); n == 0 {
				t.Fatal("no range answered wrong")
			}
		})
	}
}

// TestATricklingAnswerIsCutAndGoesOn: two answers that trickle a byte
// every 0.3 s (a connection that never falls silent long enough for the
// timeout) are cut once their rate stays under the floor and go on, on a
// fresh connection: the epochs are exact, and status counts the cuts. A
// link that is slow but steady (16 KB/s, over a floor of 1 KiB/s) is
// never cut. (Before: the two samples held for good.)
func TestATricklingAnswerIsCutAndGoesOn(t *testing.T) {
	server := s3test.Start(t, "data")
	dir := producertest.Folder(t, 16, 2)
	uploadFolder(t, server, "data", "train/", dir)
	folder, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		fault     func(n int) s3test.Fault
		bandwidth int64
		cut       bool
	}{
		{"two answers trickle", func(n int) s3test.Fault {
			if n == 12 || n == 17 { // GETs of samples, after the listing's
				return s3test.Trickle
			}
			return s3test.Pass
		}, 0, true},
		{"a slow, steady link", func(int) s3test.Fault { return s3test.Pass }, 16000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy := s3test.StartProxy(t, server, tc.fault)
			proxy.Bandwidth.Store(tc.bandwidth)
			cfg := s3Config(proxy.Endpoint)
			cfg.SlowRate, cfg.SlowFor = 1<<10, time.Second
			src, err := source.Open(context.Background(), "s3://data/train", source.Options{S3: cfg})
			if err != nil {
				t.Fatal(err)
			}
			sameBatches(t, folder, src)
			remote := src.(source.Remote).Remote()
			if strings.Contains(remote, "cut under the rate floor") != tc.cut {
				t.Fatalf("status says %q; want the cuts said: %v (the proxy saw:\n%s)", remote, tc.cut, strings.Join(proxy.Log(), "\n"))
			}
			if tc.cut && proxy.Injected[s3test.Trickle].Load() != 2 {
				t.Fatalf("%d answers trickled, want 2", proxy.Injected[s3test.Trickle].Load())
			}
		})
	}
}
