package source_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// TestARefusingStoreIsProbedNotHammered: credentials refused after they
// worked (403 on everything), with 16 reads ahead each waiting out the
// faults. Retries draw on the store's retry quota: once it is spent, one
// request at a time probes the store and the others wait for it. Refused
// for good, the run fails with the store's state after --s3-retry-for,
// having sent a few dozen requests, not one every backoff from every
// waiting read; refused for a while, every waiting read goes on as soon
// as a probe gets through, and the epochs are exact.
func TestARefusingStoreIsProbedNotHammered(t *testing.T) {
	server := s3test.Start(t, "data")
	dir := producertest.Folder(t, 48, 3)
	uploadFolder(t, server, "data", "train/", dir)
	var refusing atomic.Bool
	proxy := s3test.StartProxy(t, server, func(int) s3test.Fault {
		if refusing.Load() {
			return s3test.AccessDenied
		}
		return s3test.Pass
	})
	open := func(retryFor time.Duration) source.Source {
		t.Helper()
		cfg := s3Config(proxy.Endpoint)
		cfg.RetryFor, cfg.RetryQuota = retryFor, 20 // 4 retries before the probe
		src, err := source.Open(context.Background(), "s3://data/train", source.Options{S3: cfg})
		if err != nil {
			t.Fatal(err)
		}
		return src
	}

	t.Run("refused for good", func(t *testing.T) {
		src := open(3 * time.Second)
		cfg := producertest.Config(src, 4, 1, 2)
		cfg.Fetch = 16
		refusing.Store(true)
		defer refusing.Store(false)
		before := proxy.Injected[s3test.AccessDenied].Load()
		r := producertest.StartProducer(t, cfg, time.Minute)
		_, readErr := r.Read(t, nil)
		runErr := <-r.Done
		sent := proxy.Injected[s3test.AccessDenied].Load() - before
		// 16 first tries ahead, the workers' own tries once those fail,
		// 4 retries from the quota, then one probe at a time: each probe
		// backs off as one request does (about 7 tries in 3 s). Without
		// the quota (RetryQuota 1e9), 16 reads each retrying for 3 s sent
		// 378 here.
		t.Logf("%d requests refused; reading ended in %v", sent, readErr)
		if !errors.Is(runErr, remote.ErrUnavailable) || readErr == nil {
			t.Fatalf("producer %v, reading %v: want the store's state", runErr, readErr)
		}
		if sent > 80 {
			t.Fatalf("%d requests sent to a store that refused them all, for 3 s of --s3-retry-for", sent)
		}
	})

	t.Run("refused for a while", func(t *testing.T) {
		src := open(time.Minute)
		cfg := producertest.Config(src, 4, 2, 2)
		cfg.Fetch = 16
		refusing.Store(true)
		r := producertest.StartProducer(t, cfg, 2*time.Minute)
		probed := make(chan bool)
		go func() { // the refusal's course, owned by the test (it waits on probed)
			deadline := time.Now().Add(waittest.Limit)
			for !strings.Contains(src.(source.Remote).Remote(), "retry quota spent") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond) // polls status, as a person watching it would
			}
			refusing.Store(false)
			probed <- time.Now().Before(deadline)
		}()
		batches, err := r.Read(t, nil)
		if !<-probed {
			t.Fatalf("status never said the retry quota was spent: %s", src.(source.Remote).Remote())
		}
		r.Cancel()
		if runErr := <-r.Done; err != nil || runErr != nil {
			t.Fatalf("reading %v, producer %v", err, runErr)
		}
		if err := (producertest.Stream{Good: producertest.All(48), Label: src.Label, BatchSize: 4, Epochs: 2}).Check(batches); err != nil {
			t.Fatal(err)
		}
	})
}
