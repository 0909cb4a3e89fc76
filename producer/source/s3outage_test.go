package source_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// TestAnOutageIsWaitedOut: mid-epoch the store goes down (every
// connection refused), then answers every request 503 with Retry-After,
// then recovers. Within --s3-retry-for the run waits it out and ends in
// exact epochs, no sample marked bad, whether shards are read whole or
// each sample alone with 16 read ahead (a read ahead that met the outage
// is read again, never taken as the sample's verdict); meanwhile status
// says the producer waits on the store. (The outage is 30 s
// against a 2-minute budget: here 1.5 s and 1.5 s against 30 s.)
func TestAnOutageIsWaitedOut(t *testing.T) {
	for _, mode := range []string{"whole shards", "samples alone, fetched ahead"} {
		t.Run(mode, func(t *testing.T) {
			server := s3test.Start(t, "data")
			local := producertest.Shards(t, producertest.Folder(t, 60, 3), 10)
			spec := uploadShards(t, server, "data", local)
			var unavailable atomic.Bool
			proxy := s3test.StartProxy(t, server, func(int) s3test.Fault {
				if unavailable.Load() {
					return s3test.Unavailable
				}
				return s3test.Pass
			})
			proxy.RetryAfter.Store(1)
			cfg := s3Config(proxy.Endpoint)
			cfg.RetryFor = 30 * time.Second
			src, err := source.Open(context.Background(), spec, source.Options{S3: cfg})
			if err != nil {
				t.Fatal(err)
			}
			pcfg := producertest.Config(src, 4, 2, 1)
			if mode == "whole shards" {
				streaming(t, src, local)
			} else {
				src.(*source.Shards).ShardMemory(0)
				pcfg.Fetch = 16
			}
			store := src.(*source.Shards).Store()
			r := producertest.StartProducer(t, pcfg, 2*time.Minute)
			var sawWaiting atomic.Bool
			phases := make(chan error, 1)
			batches, err := r.Read(t, func(j uint64, _ *batchfile.Batch) {
				if j != 1 {
					return
				}
				proxy.Down(t)
				go func() { // the outage's course, owned by the test (it waits on phases)
					time.Sleep(1500 * time.Millisecond) // the outage's length: the scenario, not a wait for an event
					sawWaiting.Store(waiting(src))
					unavailable.Store(true)
					proxy.Up(t)
					time.Sleep(1500 * time.Millisecond)
					// The 503 phase lasts until a request has met it: a
					// backoff begun in the refused phase may outlast 1.5 s
					// (CI once saw no 503 at all).
					err := waittest.Wait("a request meets the 503s", func() bool {
						return proxy.Injected[s3test.Unavailable].Load() > 0
					})
					sawWaiting.Store(sawWaiting.Load() || waiting(src))
					unavailable.Store(false)
					phases <- err
				}()
			})
			if perr := <-phases; perr != nil {
				t.Fatal(perr)
			}
			if err != nil {
				t.Fatalf("the consumer's reading ended in %v", err)
			}
			r.Cancel() // its epochs made: a run ends when its mount does
			if err := <-r.Done; err != nil {
				t.Fatalf("producer: %v", err)
			}
			if err := (producertest.Stream{Good: producertest.All(60), Label: src.Label, BatchSize: 4, Epochs: 2}).Check(batches); err != nil {
				t.Fatal(err)
			}
			if n := r.P.Stats().Skipped(); n != 0 {
				t.Fatalf("%d samples marked bad for an outage", n)
			}
			// Reads the run's end cut (ahead of an epoch nobody needs) are
			// no failures of the store's.
			if !sawWaiting.Load() || store.Stats.Retries.Load() == 0 || proxy.Injected[s3test.Unavailable].Load() == 0 || store.Stats.Failures.Load() != 0 {
				t.Fatalf("status said the producer waits on the store: %v; %d retries, %d 503s, %d failures; %s",
					sawWaiting.Load(), store.Stats.Retries.Load(), proxy.Injected[s3test.Unavailable].Load(), store.Stats.Failures.Load(), src.(*source.Shards).Remote())
			}
		})
	}
}

// waiting says whether status says now that the producer waits out the
// store's faults.
func waiting(src source.Source) bool {
	return strings.Contains(src.(*source.Shards).Remote(), "; waiting out the store's faults: ")
}

// TestBrokenReadsGoOnFromTheByteReached: every answer's body breaks after
// 8 KiB (the connection closed), and the link brings 32 KiB a second: the
// index pass and two epochs of whole-shard reads go on from the byte each
// break reached (a Range from there), never from the start, and end
// exact; a whole read that takes longer than the attempt's timeout goes
// on as long as bytes come.
func TestBrokenReadsGoOnFromTheByteReached(t *testing.T) {
	server := s3test.Start(t, "data")
	local := producertest.Shards(t, producertest.Folder(t, 40, 2), 10)
	spec := uploadShards(t, server, "data", local)
	_, shardBytes := producertest.ShardFiles(t, local)
	proxy := s3test.StartProxy(t, server, func(int) s3test.Fault { return s3test.Pass })
	proxy.CutAfter.Store(8 << 10)
	cfg := s3Config(proxy.Endpoint)
	cfg.RetryFor = 30 * time.Second
	src, err := source.Open(context.Background(), spec, source.Options{S3: cfg})
	if err != nil {
		t.Fatal(err)
	}
	streaming(t, src, local)
	batches := producertest.Produce(t, producertest.Config(src, 4, 2, 1))
	if err := (producertest.Stream{Good: producertest.All(40), Label: src.Label, BatchSize: 4, Epochs: 2}).Check(batches); err != nil {
		t.Fatal(err)
	}
	st := &src.(*source.Shards).Store().Stats
	// Going on from the byte reached reads each shard's bytes once a
	// pass (the index's, then at most two epochs'): from the start, each
	// break would read the first 8 KiB again, and never end.
	if st.Resumed.Load() == 0 || st.Failures.Load() != 0 || st.Bytes.Load() > 3*shardBytes {
		t.Fatalf("%d reads resumed, %d failed, %d bytes for 3 passes over %d: %s", st.Resumed.Load(), st.Failures.Load(), st.Bytes.Load(), shardBytes, src.(*source.Shards).Remote())
	}

	// A slow link: each whole read takes several times the timeout.
	proxy.CutAfter.Store(0)
	proxy.Bandwidth.Store(32 << 10)
	// A whole shard's read (about 40 KiB at 32 KiB a second) takes three
	// times the timeout.
	// (At 100 ms, a race-built run beside three other packages met a
	// silence that long and retried.)
	cfg.Timeout = 400 * time.Millisecond
	slow, err := source.Open(context.Background(), spec, source.Options{S3: cfg})
	if err != nil {
		t.Fatalf("indexing over a slow link: %v", err)
	}
	streaming(t, slow, local)
	if err := (producertest.Stream{Good: producertest.All(40), Label: slow.Label, BatchSize: 4, Epochs: 1}).Check(producertest.Produce(t, producertest.Config(slow, 4, 1, 1))); err != nil {
		t.Fatal(err)
	}
	if st := &slow.(*source.Shards).Store().Stats; st.Failures.Load() != 0 || st.Retries.Load() != 0 {
		t.Fatalf("a slow link: %s", slow.(*source.Shards).Remote())
	}
}

// TestADeletedBucketFailsTheRunAndMarksNothing: the bucket of a mount of
// ImageFolder keys is deleted mid-run (at once: its directory moved away
// under the server): the first requests that meet it fail the run naming
// the bucket, read ahead or not, and no sample is marked bad.
func TestADeletedBucketFailsTheRunAndMarksNothing(t *testing.T) {
	server := s3test.Start(t, "data")
	uploadFolder(t, server, "data", "train/", producertest.Folder(t, 40, 2))
	src, err := source.Open(context.Background(), "s3://data/train/", source.Options{S3: s3Config(server.Endpoint)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := producertest.Config(src, 4, 2, 1)
	cfg.Fetch = 16
	r := producertest.StartProducer(t, cfg, time.Minute)
	_, readErr := r.Read(t, func(j uint64, _ *batchfile.Batch) {
		if j == 0 { // as `aws s3 rb --force` does: every key deleted, one by one, then the bucket
			server.Empty(t, "data")
			if err := os.Rename(filepath.Join(server.Root, "data"), filepath.Join(server.Root, "deleted")); err != nil {
				t.Fatal(err)
			}
		}
	})
	r.Cancel()
	runErr := <-r.Done
	if !errors.Is(readErr, batchstore.ErrProducerFailed) || !strings.Contains(readErr.Error(), "the bucket is gone") || !remote.StoreFault(runErr) {
		t.Fatalf("reading ended in %v, producer %v: want the producer's failure saying the bucket is gone", readErr, runErr)
	}
	if n := r.P.Stats().Skipped(); n != 0 {
		t.Fatalf("%d samples marked bad for a deleted bucket", n)
	}
}

// TestTheFetcherLeavesWholeShardsToTheSource: with samples fetched 256
// ahead (--fetch 64, the default for s3://) and a shard memory of 4
// shards, every GET is a whole shard's: the fetcher does not ask past
// what the shard memory holds and have those samples read alone (before:
// 440 of 600 samples read one by one beside 30 whole-shard GETs).
func TestTheFetcherLeavesWholeShardsToTheSource(t *testing.T) {
	const n, perShard = 120, 10
	_, local, spec, proxy := s3Shards(t, n, perShard)
	src, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(proxy.Endpoint)})
	if err != nil {
		t.Fatal(err)
	}
	streaming(t, src, local)
	atOpen := len(proxy.Log())
	cfg := producertest.Config(src, 8, 2, 2)
	cfg.Fetch = 64
	if err := (producertest.Stream{Good: producertest.All(n), Label: src.Label, BatchSize: 8, Epochs: 2}).Check(producertest.Produce(t, cfg)); err != nil {
		t.Fatal(err)
	}
	gets := byMethod(proxy.Log()[atOpen:], " GET ")
	whole := src.(*source.Shards).Stats().Reads
	if int64(len(gets)) != whole {
		t.Fatalf("%d GETs, %d of them whole shards: the rest read samples alone:\n%s", len(gets), whole, strings.Join(gets, "\n"))
	}
}

// TestABucketDeletedKeyByKeyMarksNothing: as `aws s3 rb --force` does
// over a large bucket, the keys go first, one after the other, while the
// producer reads on: it meets missing keys while a listing still shows
// others, then the bucket goes. The run fails with the store's state,
// and none of the samples whose keys went missing is counted as skipped:
// a missing key is its sample's loss only once a listing at its epoch's
// end shows the dataset still there. (Before: 11 samples counted as
// skipped before the failure.)
func TestABucketDeletedKeyByKeyMarksNothing(t *testing.T) {
	server := s3test.Start(t, "data")
	uploadFolder(t, server, "data", "train/", producertest.Folder(t, 40, 2))
	src, err := source.Open(context.Background(), "s3://data/train/", source.Options{S3: s3Config(server.Endpoint)})
	if err != nil {
		t.Fatal(err)
	}
	r := producertest.StartProducer(t, producertest.Config(src, 4, 2, 1), time.Minute)
	last := filepath.Join(server.Root, "data", "train", "class001", "img000039.jpg")
	_, readErr := r.Read(t, func(j uint64, _ *batchfile.Batch) {
		switch j {
		case 0: // every key but one deleted
			err := filepath.WalkDir(filepath.Join(server.Root, "data", "train"), func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || p == last {
					return err
				}
				return os.Remove(p)
			})
			if err != nil {
				t.Fatal(err)
			}
		case 3: // the producer has met missing keys; then the last one and the bucket go
			waittest.Until(t, "the producer meets missing keys", func() bool {
				st := r.P.Stats().Snapshot()
				return st.Missing+st.Skipped > 0
			})
			if err := os.Rename(filepath.Join(server.Root, "data"), filepath.Join(server.Root, "deleted")); err != nil {
				t.Fatal(err)
			}
		}
	})
	r.Cancel()
	runErr := <-r.Done
	if !errors.Is(readErr, batchstore.ErrProducerFailed) || !remote.StoreFault(runErr) {
		t.Fatalf("reading ended in %v, producer %v: want the producer's failure with the store's state (%+v)", readErr, runErr, r.P.Stats().Snapshot())
	}
	if n := r.P.Stats().Skipped(); n != 0 {
		t.Fatalf("%d samples counted as skipped for a bucket deleted key by key (%v)", n, r.P.Stats().Snapshot().RecentSkips)
	}
}
