package source_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// epochRates makes epochs of src at 224 px, batches of 64, on every
// core with a mount's GOMAXPROCS, with a buffer of three batches (the
// producer cannot run ahead and be timed as if it were the reader's
// speed), and returns images/s over the whole first epoch and over the
// later ones together, and the time to the first batch. firstDone, if
// given, is called once the first epoch is made.
func epochRates(b *testing.B, src source.Source, epochs, fetch int, firstDone ...func()) (first, later float64, firstBatch time.Duration) {
	b.Helper()
	cfg := producer.Config{Source: src, BatchSize: 64, ImageSize: 224, Epochs: epochs, Workers: runtime.NumCPU(),
		Seed: 1, Layout: pipeline.NCHW, Transform: pipeline.Train, Fetch: fetch}
	// As a mount runs it (tsock mount sets this).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(producer.GoProcs(cfg.Workers)))
	store := batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()*3))
	defer store.Close()
	p, err := producer.New(cfg, store, memfile.NewMemFD())
	if err != nil {
		b.Fatal(err)
	}
	if err := store.Join("c"); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- p.Run(ctx) }()
	var firstEnd time.Time
	producertest.Drain(b, ctx, store, func(ref batchstore.Ref, _ *batchstore.Lease) {
		if firstBatch == 0 {
			firstBatch = time.Since(start)
		}
		if ref.Epoch == 0 {
			firstEnd = time.Now()
		} else if ref.Epoch == 1 && len(firstDone) > 0 {
			firstDone[0]()
			firstDone = nil
		}
	})
	end := time.Now()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	n := float64(src.Len())
	return n / firstEnd.Sub(start).Seconds(), n * float64(epochs-1) / end.Sub(firstEnd).Seconds(), firstBatch
}

// benchShards puts the images of TSOCK_BENCH_DIR (an ImageFolder) as
// WebDataset shards of 100 into versitygw on loopback: the folder, the
// server, the local shards' spec and their s3:// spec.
func benchShards(b *testing.B) (dir string, server *s3test.Server, local, spec string) {
	dir = os.Getenv("TSOCK_BENCH_DIR")
	if dir == "" {
		b.Skip("TSOCK_BENCH_DIR: an ImageFolder to measure (scripts/bench.sh sets it)")
	}
	server = s3test.Start(b, "bench")
	local = producertest.Shards(b, dir, 100)
	if err := os.CopyFS(filepath.Join(server.Root, "bench", "shards"), os.DirFS(filepath.Dir(local))); err != nil {
		b.Fatal(err)
	}
	return dir, server, local, "s3://bench/shards/" + filepath.Base(local)
}

// benchParquet writes dir's images as Parquet files in the Hub's layout,
// row groups of 100 rows (a shard's worth), 10 a file, into the server
// (bucket bench, under parquet/), and returns their spec, their row
// groups and the bytes of their image chunks: what an epoch reads.
func benchParquet(b *testing.B, dir string, server *s3test.Server) (spec string, groups int, chunkBytes int64) {
	src, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		b.Fatal(err)
	}
	files := max((src.Len()+999)/1000, 1)
	local := producertest.Parquet(b, dir, producertest.ParquetOptions{Files: files, RowsPerGroup: 100})
	if err := os.CopyFS(filepath.Join(server.Root, "bench", "parquet"), os.DirFS(filepath.Dir(local))); err != nil {
		b.Fatal(err)
	}
	chunkBytes, groups = producertest.ImageChunks(b, filepath.Dir(local))
	return "s3://bench/parquet/" + filepath.Base(local), groups, chunkBytes
}

// BenchmarkRemoteEpochs: the images of TSOCK_BENCH_DIR (an ImageFolder)
// as a local folder, then as WebDataset shards of 100 in versitygw on
// loopback, without and with the cache, one after the other in each
// iteration: images/s over the whole first epoch and the two later ones.
func BenchmarkRemoteEpochs(b *testing.B) {
	dir, server, _, spec := benchShards(b)
	cfg := s3Config(server.Endpoint)
	for b.Loop() {
		folder, err := source.Open(context.Background(), dir, source.Options{})
		if err != nil {
			b.Fatal(err)
		}
		f1, fl, _ := epochRates(b, folder, 3, 0)
		shards, err := source.Open(context.Background(), spec, source.Options{S3: cfg})
		if err != nil {
			b.Fatal(err)
		}
		s1, sl, _ := epochRates(b, shards, 3, 64)
		cached := producertest.Cache(b, shards, 8<<30, "")
		c1, cl, _ := epochRates(b, cached, 3, 64)
		fmt.Printf("remote-epochs folder %.0f %.0f s3 %.0f %.0f s3-cache %.0f %.0f\n", f1, fl, s1, sl, c1, cl)
	}
}

// BenchmarkRemoteOpen: what a mount's open costs over 100,000 keys in
// versitygw on loopback: listing an ImageFolder of 1,000 classes of 100
// images, and indexing 1,000 shards of 100 samples.
func BenchmarkRemoteOpen(b *testing.B) {
	server := s3test.Start(b, "bench")
	img := make([]byte, 1024)
	for c := range 1000 {
		d := filepath.Join(server.Root, "bench", "folder", fmt.Sprintf("n%08d", c))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range 100 {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("%08d.JPEG", c*100+i)), img, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	writeShards(b, filepath.Join(server.Root, "bench", "shards"), 1000, 100, img)
	cfg := s3Config(server.Endpoint)
	for b.Loop() {
		start := time.Now()
		folder, err := source.Open(context.Background(), "s3://bench/folder/", source.Options{S3: cfg})
		if err != nil || folder.Len() != 100000 {
			b.Fatalf("folder: %v", err)
		}
		listed := time.Since(start)
		start = time.Now()
		shards, err := source.Open(context.Background(), "s3://bench/shards/train-{000000..000999}.tar", source.Options{S3: cfg})
		if err != nil || shards.Len() != 100000 {
			b.Fatalf("shards: %v", err)
		}
		fmt.Printf("remote-open list %.3f index %.3f\n", listed.Seconds(), time.Since(start).Seconds())
	}
}

// BenchmarkRemoteLatency: the images of TSOCK_BENCH_DIR as a local
// folder (the S3 server idle beside it), then as WebDataset shards of
// 100 in versitygw behind a proxy that holds every answer back by a
// first-byte delay of 0, 30 and 100 ms: read whole shards with a shard
// memory of 12 shards (a dataset larger than it holds, as ImageNet's 140
// GB is for the default 512 MiB; sized as docs/object-storage.md says for
// 100 ms at this rate), the same with the default shard memory
// (this dataset fits it: read once), a ranged GET per sample (--fetch 64,
// as before shards were read whole), whole shards (12 shards' memory)
// with --cache, and whole shards (12 shards' memory) opened with the
// index file an earlier open wrote (--shard-index). Three epochs each;
// per row: images/s of the first epoch and of the later two, requests and
// bytes per epoch, the bytes of the open (its index) and the first epoch
// together (the next epoch's first shards, read ahead during the first,
// included), and the open's bytes alone.
func BenchmarkRemoteLatency(b *testing.B) {
	dir, server, local, spec := benchShards(b)
	files, shardBytes := producertest.ShardFiles(b, local)
	proxy := s3test.StartProxy(b, server, func(int) s3test.Fault { return s3test.Pass })
	const epochs = 3
	// TSOCK_BENCH_DELAYS and TSOCK_BENCH_MODES (comma-separated) pick a
	// part: 100 and whole, say, for the first epoch's fixed cost on a
	// larger set.
	delays := []time.Duration{0, 30 * time.Millisecond, 100 * time.Millisecond}
	if v := os.Getenv("TSOCK_BENCH_DELAYS"); v != "" {
		delays = nil
		for _, ms := range strings.Split(v, ",") {
			n, err := strconv.Atoi(ms)
			if err != nil {
				b.Fatalf("TSOCK_BENCH_DELAYS %q: %v", v, err)
			}
			delays = append(delays, time.Duration(n)*time.Millisecond)
		}
	}
	modes := []string{"whole", "whole-fits", "per-sample", "whole-cache", "whole-indexed", "parquet", "parquet-alone"}
	if v := os.Getenv("TSOCK_BENCH_MODES"); v != "" {
		modes = strings.Split(v, ",")
	}
	pqSpec, groups, chunkBytes := benchParquet(b, dir, server)
	index := filepath.Join(b.TempDir(), "train.idx")
	if _, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(proxy.Endpoint), ShardIndex: index}); err != nil {
		b.Fatal(err) // the earlier mount that wrote it
	}
	for b.Loop() {
		for _, delay := range delays {
			folder, err := source.Open(context.Background(), dir, source.Options{})
			if err != nil {
				b.Fatal(err)
			}
			f1, fl, fb := epochRates(b, folder, epochs, 0)
			fmt.Printf("remote-latency %d folder %.0f %.0f 0 0 %d %d 0 0 %d\n", delay.Milliseconds(), f1, fl, files, shardBytes, fb.Milliseconds())
			for _, mode := range modes {
				proxy.Delay.Store(0)
				opts := source.Options{S3: s3Config(proxy.Endpoint)}
				if mode == "whole-indexed" {
					opts.ShardIndex = index
				}
				unitSpec, units, unitBytes := spec, files, shardBytes
				if strings.HasPrefix(mode, "parquet") {
					unitSpec, units, unitBytes = pqSpec, groups, chunkBytes
				}
				opened, err := source.Open(context.Background(), unitSpec, opts)
				if err != nil {
					b.Fatal(err)
				}
				shards := opened.(*source.Shards)
				st := &shards.Store().Stats
				indexBytes := st.Bytes.Load()
				var src source.Source = shards
				switch mode {
				case "whole", "whole-indexed":
					shards.ShardMemory(12 * shardBytes / int64(files))
				case "parquet":
					shards.ShardMemory(12 * shards.Stats().PieceBytes)
				case "per-sample", "parquet-alone":
					shards.ShardMemory(0)
				case "whole-cache":
					shards.ShardMemory(12 * shardBytes / int64(files))
					src = producertest.Cache(b, shards, 8<<30, "")
				}
				req0, bytes0 := st.Requests.Load(), st.Bytes.Load()
				var firstBytes int64
				proxy.Delay.Store(int64(delay))
				s1, sl, fb := epochRates(b, src, epochs, 64, func() { firstBytes = indexBytes + st.Bytes.Load() - bytes0 })
				req, bytes := st.Requests.Load()-req0, st.Bytes.Load()-bytes0
				fmt.Printf("remote-latency %d %s %.0f %.0f %.1f %.0f %d %d %d %d %d\n", delay.Milliseconds(), mode, s1, sl,
					float64(req)/epochs, float64(bytes)/epochs, units, unitBytes, firstBytes, indexBytes, fb.Milliseconds())
			}
		}
	}
	proxy.Delay.Store(0)
}
