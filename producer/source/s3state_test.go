package source_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// A store's state is not a sample's: credentials refused after they
// worked, or a dataset that is gone, fail the run loudly (the consumer's
// wait ends in the producer's failure, the producer returns
// ErrUnavailable) and mark no sample bad; a refusal that passes loses
// nothing. Before, each of these skipped the samples it touched and
// delivered short epochs that looked done.

// stateRun reads consumer c's batches of shards of 24 images in 3 shards
// through a proxy whose fault, once armed (after the first batch), is
// what to do to request n; it returns how the consumer's reading ended,
// the producer's result, the samples read and the producer's skips.
func stateRun(t *testing.T, epochs int, retryFor time.Duration, fault func(n int) s3test.Fault, after func(*s3test.Server)) (read, skipped int, lookupErr, runErr error) {
	t.Helper()
	server := s3test.Start(t, "data")
	dir := producertest.Folder(t, 24, 2)
	local := producertest.Shards(t, dir, 8)
	spec := uploadShards(t, server, "data", local)
	var armed atomic.Bool
	proxy := s3test.StartProxy(t, server, func(n int) s3test.Fault {
		if armed.Load() {
			return fault(n)
		}
		return s3test.Pass
	})
	cfg := s3Config(proxy.Endpoint)
	cfg.RetryFor = retryFor
	src, err := source.Open(context.Background(), spec, source.Options{S3: cfg})
	if err != nil {
		t.Fatal(err)
	}
	streaming(t, src, local) // the second epoch reads the store again
	r := producertest.StartProducer(t, producertest.Config(src, 4, epochs, 1), time.Minute)
	_, lookupErr = r.Read(t, func(j uint64, b *batchfile.Batch) {
		read += b.Samples()
		if j == 0 {
			armed.Store(true)
			if after != nil {
				after(server)
			}
		}
	})
	r.Cancel()
	return read, int(r.P.Stats().Skipped()), lookupErr, <-r.Done
}

func TestRevokedCredentialsFailTheRun(t *testing.T) {
	read, skipped, lookupErr, runErr := stateRun(t, 2, 300*time.Millisecond,
		func(int) s3test.Fault { return s3test.AccessDenied }, nil)
	if !errors.Is(lookupErr, batchstore.ErrProducerFailed) || !strings.Contains(lookupErr.Error(), "refused") {
		t.Fatalf("the consumer's reading ended in %v (after %d samples), want the producer's failure naming the refusal", lookupErr, read)
	}
	if !errors.Is(runErr, remote.ErrUnavailable) {
		t.Fatalf("producer: %v", runErr)
	}
	if skipped != 0 {
		t.Fatalf("%d samples marked bad for the store's refusal", skipped)
	}
}

func TestARefusalThatPassesLosesNothing(t *testing.T) {
	var blip atomic.Int64
	read, skipped, lookupErr, runErr := stateRun(t, 2, time.Minute, func(int) s3test.Fault {
		if blip.Add(1) <= 6 { // 6 requests refused (backing off 3 s in all), then the token is good again
			return s3test.AccessDenied
		}
		return s3test.Pass
	}, nil)
	if lookupErr != nil || runErr != nil || skipped != 0 || read != 2*24 {
		t.Fatalf("after a blip of 6 refusals: read %d of %d samples, %d skipped, reading ended in %v, producer %v", read, 2*24, skipped, lookupErr, runErr)
	}
}

func TestAnEmptiedBucketFailsTheRun(t *testing.T) {
	read, skipped, lookupErr, runErr := stateRun(t, 2, time.Minute,
		func(int) s3test.Fault { return s3test.Pass }, func(s *s3test.Server) { s.Empty(t, "data") })
	if !errors.Is(lookupErr, batchstore.ErrProducerFailed) || !strings.Contains(lookupErr.Error(), "vanished") {
		t.Fatalf("the consumer's reading ended in %v (after %d samples), want the producer's failure saying the dataset vanished", lookupErr, read)
	}
	if !errors.Is(runErr, remote.ErrUnavailable) {
		t.Fatalf("producer: %v", runErr)
	}
	// A shard deleted while others are left is its samples' loss, so the
	// shards deleted before the last one may be skipped; never all 24.
	if skipped > 16 {
		t.Fatalf("%d samples marked bad for an emptied bucket", skipped)
	}
}
