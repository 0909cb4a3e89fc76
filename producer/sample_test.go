package producer

import (
	"context"
	"os"
	"testing"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/source"
)

// testWorker is one worker of a producer over src, making samples of
// size×size; closed at the end of the test.
func testWorker(tb testing.TB, src source.Source, size int, decoder string) *worker {
	tb.Helper()
	cfg := Config{Source: src, BatchSize: 1, ImageSize: size, Epochs: 1, Workers: 1,
		Layout: pipeline.NCHW, Transform: pipeline.Train, Decoder: decoder}
	p, err := New(cfg, batchstore.New(StoreConfig(cfg, 1<<30)), memfile.NewMemFD())
	if err != nil {
		tb.Skipf("SKIPPED: %v", err)
	}
	w := p.newWorker()
	tb.Cleanup(w.close)
	return w
}

// benchWorker is a worker over a folder of photo-sized JPEGs.
func benchWorker(b *testing.B, decoder string) (*worker, []*task) {
	b.Helper()
	// TSOCK_BENCH_DIR points at a folder to measure (scripts/bench.sh
	// uses the files it gives torchvision too).
	dir := os.Getenv("TSOCK_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
		if err := source.WriteFolder(dir, source.GenOptions{Images: 32, Classes: 4, MinSide: 375, MaxSide: 500, Quality: 90}); err != nil {
			b.Fatal(err)
		}
	}
	src, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		b.Fatal(err)
	}
	w := testWorker(b, src, 224, decoder)
	// Epochs after the first: the steady state (the first also reads each
	// file whole, to verify it).
	// Samples go to 16 buffers in turn, written again and again, as the
	// producer's go into batch memory that huge pages back: a fresh
	// buffer per sample timed the kernel's page faults (a fifth of the
	// time on these VMs), not the producer.
	var tasks []*task
	bufs := make([][]byte, 16)
	for i := range bufs {
		bufs[i] = make([]byte, 3*224*224)
	}
	for i := 0; i < src.Len(); i++ {
		tasks = append(tasks, &task{index: i, epoch: 1 + i%3, buf: bufs[i%len(bufs)]})
	}
	return w, tasks
}

// BenchmarkSample is one core's work per image: read, decode, crop,
// resize to 224, flip, into the sample buffer.
func BenchmarkSample(b *testing.B) {
	for _, dec := range []string{pipeline.DecoderTurbo, pipeline.DecoderGo} {
		b.Run(dec, func(b *testing.B) {
			w, tasks := benchWorker(b, dec)
			i := 0
			for b.Loop() {
				if err := w.make(context.Background(), tasks[i%len(tasks)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "img/s")
		})
	}
}

// The pipeline's channels-last layout is the one the batch format shapes
// as [B,S,S,3].
func TestLayoutNamesAgree(t *testing.T) {
	if string(pipeline.NHWC) != batchfile.ChannelsLast {
		t.Fatalf("pipeline.NHWC is %q, batchfile.ChannelsLast %q", pipeline.NHWC, batchfile.ChannelsLast)
	}
}
