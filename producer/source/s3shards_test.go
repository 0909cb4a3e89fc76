package source_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// uploadShards puts the shards of spec into bucket of s under train/
// and returns the s3:// spec.
func uploadShards(t *testing.T, s *s3test.Server, bucket, spec string) string {
	t.Helper()
	dir := filepath.Dir(spec)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		s.Put(t, bucket, "train/"+e.Name(), filepath.Join(dir, e.Name()))
	}
	return "s3://" + bucket + "/train/" + filepath.Base(spec)
}

// openBoth opens spec through endpoint and the folder dir it was made of.
func openBoth(t *testing.T, spec, endpoint, dir string) (s3 source.Source, folder source.Source) {
	t.Helper()
	s3, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(endpoint)})
	if err != nil {
		t.Fatal(err)
	}
	if folder, err = source.Open(context.Background(), dir, source.Options{}); err != nil {
		t.Fatal(err)
	}
	return s3, folder
}

func s3Config(endpoint string) remote.Config {
	cfg := remote.DefaultConfig()
	cfg.Endpoint, cfg.Timeout = endpoint, 10*time.Second
	return cfg
}

// TestS3ShardsGiveTheFoldersBatchesThroughFaults: shards in a real S3
// server, read through a proxy that throttles (503 SlowDown), fails
// (500), cuts bodies short, resets connections and stalls past the
// timeout, give the same batches as the same images in a local
// ImageFolder, byte for byte; the faults are retried and counted.
func TestS3ShardsGiveTheFoldersBatchesThroughFaults(t *testing.T) {
	server := s3test.Start(t, "data")
	dir := producertest.Folder(t, 30, 3)
	local := producertest.Shards(t, dir, 7)
	spec := uploadShards(t, server, "data", local)
	faults := []s3test.Fault{s3test.SlowDown, s3test.Error500, s3test.Truncate, s3test.Reset, s3test.Stall}
	proxy := s3test.StartProxy(t, server, func(n int) s3test.Fault {
		if n%3 == 0 {
			return faults[(n/3)%len(faults)]
		}
		return s3test.Pass
	})
	cfg := s3Config(proxy.Endpoint)
	cfg.Timeout = 300 * time.Millisecond // a stalled request times out, and is tried again
	src, err := source.Open(context.Background(), spec, source.Options{S3: cfg})
	if err != nil {
		t.Fatal(err)
	}
	streaming(t, src, local) // each epoch reads the store
	folder, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sameBatches(t, folder, src)
	// A connection closed before any answer is retried by Go's HTTP
	// transport itself (an idempotent GET on a reused connection), below
	// tsock's count; every other fault is tsock's retry, or a read that
	// went on from the byte it reached (resumed).
	remote := src.(*source.Shards).Remote()
	counted := proxy.Faults.Load() - proxy.Injected[s3test.Reset].Load()
	for f := s3test.SlowDown; f <= s3test.Stall; f++ {
		if proxy.Injected[f].Load() == 0 {
			t.Fatalf("fault %d never injected", f)
		}
	}
	var retried, resumed uint64
	if _, err := fmt.Sscanf(remote[strings.Index(remote, "requests, ")+len("requests, "):], "%d retried, %d resumed, 0 failed", &retried, &resumed); err != nil || retried+resumed < counted {
		t.Fatalf("%d faults injected (%d resets); status says %q; the proxy saw:\n%s", proxy.Faults.Load(), proxy.Injected[s3test.Reset].Load(), remote, strings.Join(proxy.Log(), "\n"))
	}
	if strings.Contains(remote, s3test.SecretKey) || strings.Contains(remote, s3test.AccessKey) {
		t.Fatalf("status shows a credential: %s", remote)
	}
}

// TestS3PermanentFaultsFailAtOnce: a bucket that does not exist and
// wrong credentials fail the open with a message that names them,
// without retries; a shard deleted after indexing costs its samples
// (skipped, counted), not the run.
func TestS3PermanentFaultsFailAtOnce(t *testing.T) {
	server := s3test.Start(t, "data")
	dir := producertest.Folder(t, 12, 2)
	spec := uploadShards(t, server, "data", producertest.Shards(t, dir, 6))
	if _, err := source.Open(context.Background(), strings.Replace(spec, "s3://data/", "s3://nobucket/", 1), source.Options{S3: s3Config(server.Endpoint)}); err == nil ||
		!strings.Contains(err.Error(), "no such bucket") {
		t.Errorf("no such bucket: %v", err)
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong")
	proxy := s3test.StartProxy(t, server, func(int) s3test.Fault { return s3test.Pass })
	_, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(proxy.Endpoint)})
	// Refused at once: one request, not one a backoff for --s3-retry-for.
	if err == nil || strings.Contains(err.Error(), "wrong") || len(proxy.Log()) > 2 {
		t.Errorf("wrong credentials: %v after %d requests:\n%s", err, len(proxy.Log()), strings.Join(proxy.Log(), "\n"))
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	src, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(server.Endpoint)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(server.Root, "data", "train", "shard-001.tar")); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range producertest.Produce(t, producertest.Config(src, 4, 1, 1)) {
		n += len(b.Indices)
	}
	if n != 6 {
		t.Fatalf("%d samples made, want the 6 of the shard still there", n)
	}
}

// TestS3ThatStopsAnsweringFailsTheProducer: when the store stops
// answering mid-epoch (every request fails with 500), a consumer's wait ends
// in ErrProducerFailed naming the store, never the end of the data or a
// hang, and no sample is marked bad for it.
func TestS3ThatStopsAnsweringFailsTheProducer(t *testing.T) {
	server := s3test.Start(t, "data")
	dir := producertest.Folder(t, 24, 2)
	spec := uploadShards(t, server, "data", producertest.Shards(t, dir, 8))
	var dead atomic.Bool
	proxy := s3test.StartProxy(t, server, func(n int) s3test.Fault {
		if dead.Load() {
			return s3test.Error500
		}
		return s3test.Pass
	})
	cfg := s3Config(proxy.Endpoint)
	cfg.RetryFor = time.Second // a store dead for longer than the budget
	src, err := source.Open(context.Background(), spec, source.Options{S3: cfg})
	if err != nil {
		t.Fatal(err)
	}
	src.(*source.Shards).ShardMemory(0) // a request per sample: the store dies between them
	r := producertest.StartProducer(t, producertest.Config(src, 4, 1, 1), time.Minute)
	store, ctx := r.Store, r.Ctx
	var lookupErr error
	for j := uint64(0); lookupErr == nil; j++ {
		ref, err := store.Lookup(ctx, "c", j, 1)
		if lookupErr = err; err != nil {
			break
		}
		l, err := store.Open(ref.Seq, 1)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
		dead.Store(true) // after the first batch
	}
	if !errors.Is(lookupErr, batchstore.ErrProducerFailed) || !strings.Contains(lookupErr.Error(), "did not answer: failing for 1s (--s3-retry-for)") {
		t.Fatalf("the consumer's wait ended in %v, want the producer's failure naming the store", lookupErr)
	}
	if err := <-r.Done; !errors.Is(err, remote.ErrUnavailable) {
		t.Fatalf("producer: %v", err)
	}
	if n := r.P.Stats().Skipped(); n != 0 {
		t.Fatalf("%d samples marked bad for the store's silence", n)
	}
}

// TestCacheSparesTheNetwork: with --cache (source.NewCache) the second
// pass over shards in S3 reads no byte from the store: it only checks,
// with a HEAD a shard, that each is still the version cached.
func TestCacheSparesTheNetwork(t *testing.T) {
	server := s3test.Start(t, "data")
	spec := uploadShards(t, server, "data", producertest.Shards(t, producertest.Folder(t, 16, 2), 8))
	src, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(server.Endpoint)})
	if err != nil {
		t.Fatal(err)
	}
	cache := producertest.Cache(t, src, 64<<20, "")
	producertest.Produce(t, producertest.Config(cache, 4, 1, 1))
	st := &src.(*source.Shards).Store().Stats
	bytes, requests := st.Bytes.Load(), st.Requests.Load()
	producertest.Produce(t, producertest.Config(cache, 4, 1, 1))
	if st.Bytes.Load() != bytes || st.Requests.Load() > requests+2 || cache.Stats().Hits != 16 {
		t.Fatalf("the second pass: %d bytes, %d requests (want none, and a HEAD for each of 2 shards at most), %d cache hits",
			st.Bytes.Load()-bytes, st.Requests.Load()-requests, cache.Stats().Hits)
	}
}

// TestFetchAheadOverlapsRequests: with Config.Fetch a single worker
// still keeps several requests in flight to a store that takes its time
// to answer (each worker waiting on its own request would keep one), and
// the batches stay the folder's, byte for byte.
func TestFetchAheadOverlapsRequests(t *testing.T) {
	server := s3test.Start(t, "data")
	dir := producertest.Folder(t, 24, 3)
	spec := uploadShards(t, server, "data", producertest.Shards(t, dir, 8))
	proxy := s3test.StartProxy(t, server, func(int) s3test.Fault { return s3test.Pass })
	src, folder := openBoth(t, spec, proxy.Endpoint, dir)
	src.(*source.Shards).ShardMemory(0) // a request per sample (whole shards: TestWholeShards…)
	proxy.Delay.Store(int64(20 * time.Millisecond))
	proxy.MaxInFlight.Store(0) // the index's reads at open do not count
	cfg := producertest.Config(src, 8, 2, 1)
	cfg.Fetch = 6
	fetched := producertest.Produce(t, cfg)
	if got := proxy.MaxInFlight.Load(); got < 4 {
		t.Fatalf("at most %d requests in flight with one worker fetching 6 ahead", got)
	}
	producertest.EqualBatches(t, producertest.Produce(t, producertest.Config(folder, 8, 2, 1)), fetched, "the folder and S3 fetched ahead")
}

// TestS3EndpointFromSharedConfig: with no --s3-endpoint and no
// AWS_ENDPOINT_URL, the profile's endpoint_url and region in the shared
// config file (AWS_CONFIG_FILE, AWS_PROFILE) reach the server.
func TestS3EndpointFromSharedConfig(t *testing.T) {
	server := s3test.Start(t, "data")
	spec := uploadShards(t, server, "data", producertest.Shards(t, producertest.Folder(t, 4, 2), 4))
	config := filepath.Join(t.TempDir(), "config")
	text := "[default]\nendpoint_url = http://127.0.0.1:1\n[profile lab]\nregion = us-east-1\nendpoint_url = " + server.Endpoint + "\n"
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", config)
	t.Setenv("AWS_PROFILE", "lab")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_REGION", "")
	src, err := source.Open(context.Background(), spec, source.Options{S3: s3Config("")})
	if err != nil {
		t.Fatal(err)
	}
	if src.Len() != 4 || !strings.Contains(src.(*source.Shards).Remote(), server.Endpoint) {
		t.Fatalf("%d samples from %s", src.Len(), src.(*source.Shards).Remote())
	}
}
