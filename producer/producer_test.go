package producer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/producertest"
)

// produce runs a producer over cfg and reads every batch as one consumer.
func produce(t *testing.T, cfg producer.Config) []*producer.Batch {
	t.Helper()
	store := batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()*3))
	defer store.Close()
	p, err := producer.New(cfg, store, memfile.NewMemFD())
	if err != nil {
		t.Fatal(err)
	}
	return produceWith(t, p, store)
}

func config(src producer.Source, batch, epochs, workers int) producer.Config {
	return producer.Config{Source: src, BatchSize: batch, ImageSize: 12, Epochs: epochs,
		Workers: workers, Seed: 5, Layout: producer.NCHW, Transform: producer.Train}
}

func TestEpochsAreExact(t *testing.T) {
	src := producer.NewSynthetic(37, 4)
	got := produce(t, config(src, 8, 3, 3))
	want := producertest.Stream{Good: producertest.All(37), Label: src.Label, BatchSize: 8, Epochs: 3}
	if err := want.Check(got); err != nil {
		t.Fatal(err)
	}
	if first, second := got[0].Indices, got[5].Indices; fmt.Sprint(first) == fmt.Sprint(second) {
		t.Fatal("epochs 0 and 1 start with the same order: no reshuffle")
	}
}

func TestSameBytesWhateverTheWorkers(t *testing.T) {
	src := producer.NewSynthetic(20, 3)
	equalBatches(t, produce(t, config(src, 6, 2, 1)), produce(t, config(src, 6, 2, 4)), "1 and 4 workers")
}

func TestEvalIsInOrder(t *testing.T) {
	src := producer.NewSynthetic(10, 2)
	cfg := config(src, 4, 1, 2)
	cfg.Transform = producer.Eval
	got := produce(t, cfg)
	var idx []int64
	for _, b := range got {
		idx = append(idx, b.Indices...)
	}
	if fmt.Sprint(idx) != fmt.Sprint([]int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("eval order %v", idx)
	}
}

func TestFolderLabelsFollowImageFolderOrder(t *testing.T) {
	dir := producertest.Folder(t, 12, 3)
	src, err := producer.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(src.Classes()) != "[class000 class001 class002]" {
		t.Fatalf("classes %v", src.Classes())
	}
	for i := 0; i < src.Len(); i++ {
		class := filepath.Base(filepath.Dir(src.Name(i)))
		if src.Classes()[src.Label(i)] != class {
			t.Fatalf("sample %d (%s) has label %d", i, src.Name(i), src.Label(i))
		}
		if i > 0 && src.Name(i) < src.Name(i-1) {
			t.Fatalf("samples not in path order at %d", i)
		}
	}
}

func TestBadInputsAreSkippedAndCounted(t *testing.T) {
	for _, dec := range []string{producer.DecoderTurbo, producer.DecoderGo} {
		t.Run(dec, func(t *testing.T) { badInputs(t, dec) })
	}
}

func badInputs(t *testing.T, decoder string) {
	dir := producertest.Folder(t, 12, 3)
	bad, tiny := producertest.BadFiles(t, dir, "class001")
	src, err := producer.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(src, 5, 2, 2)
	cfg.Decoder = decoder
	store := batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()*4))
	p, err := producer.New(cfg, store, memfile.NewMemFD())
	if err != nil {
		t.Fatalf("decoder %s: %v", decoder, err)
	}
	got := produceWith(t, p, store)
	good := producertest.Without(src, bad)
	want := producertest.Stream{Good: good, Label: src.Label, BatchSize: 5, Epochs: 2}
	if err := want.Check(got); err != nil {
		t.Fatal(err)
	}
	stats := p.Stats().Snapshot()
	if stats.Skipped != len(bad) {
		t.Fatalf("skipped %d, want %d: %v", stats.Skipped, len(bad), stats.RecentSkips)
	}
	for _, reason := range stats.RecentSkips {
		if !strings.Contains(reason, "zz-") {
			t.Fatalf("skip reason does not name the file: %q", reason)
		}
	}
	if !slices.Contains(names(src, good), tiny) {
		t.Fatal("a 1x1 image was skipped: images smaller than the output must be upscaled")
	}
}

// produceWith runs p and reads every batch through the store's API.
func produceWith(t *testing.T, p *producer.Producer, store *batchstore.Store) []*producer.Batch {
	t.Helper()
	if err := store.Join("c"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var out []*producer.Batch
	// A producer stalled on a file (a FIFO) fails the test instead of
	// hanging it.
	stalled, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()
	drain(t, stalled, store, func(ref batchstore.Ref, l *batchstore.Lease) {
		data := make([]byte, ref.Size)
		if _, err := l.Blob().ReadAt(data, 0); err != nil {
			t.Fatal(err)
		}
		b, err := producer.ParseBatch(data)
		if err != nil {
			t.Fatalf("batch %d: %v", ref.Local, err)
		}
		out = append(out, b)
	})
	cancel() // it idles once nobody needs more
	if err := <-done; err != nil {
		t.Fatalf("producer: %v", err)
	}
	return out
}

// drain reads consumer "c"'s batches in order until the end, calling
// each with every one while it is open.
func drain(tb testing.TB, ctx context.Context, store *batchstore.Store, each func(batchstore.Ref, *batchstore.Lease)) {
	tb.Helper()
	for i := uint64(0); ; i++ {
		ref, err := store.Lookup(ctx, "c", i, 1)
		if errors.Is(err, batchstore.ErrNotFound) {
			return
		}
		if err != nil {
			tb.Fatalf("lookup %d: %v", i, err)
		}
		l, err := store.Open(ref.Seq, 1)
		if err != nil {
			tb.Fatal(err)
		}
		each(ref, l)
		l.Release()
	}
}

func names(src producer.Source, idx []int) []string {
	var out []string
	for _, i := range idx {
		out = append(out, src.Name(i))
	}
	return out
}

func TestAllInputsBadStopsWithAnError(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	os.WriteFile(filepath.Join(dir, "a", "x.jpg"), []byte("junk"), 0o644)
	src, err := producer.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(src, 2, 3, 1)
	store := batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()*2))
	p, _ := producer.New(cfg, store, memfile.NewMemFD())
	err = p.Run(context.Background())
	if !errors.Is(err, batchstore.ErrNoSamples) || !strings.Contains(err.Error(), "no decodable image in "+dir+" (1 skipped)") {
		t.Fatalf("got %v, want a no-decodable-image error naming the skips", err)
	}
}

func TestScanErrors(t *testing.T) {
	empty := t.TempDir()
	noImages := t.TempDir()
	os.MkdirAll(filepath.Join(noImages, "cls"), 0o755)
	os.WriteFile(filepath.Join(noImages, "cls", "notes.txt"), []byte("x"), 0o644)
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct{ spec, want string }{
		{"/nonexistent/tsock", "no such file"},
		{empty, "no image files"},
		{noImages, "no image files"},
		{file, "not a directory"},
		{"", "no directory"},
		{"synthetic:0", "positive"},
		{"synthetic:x", "positive"},
	} {
		_, err := producer.Open(tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("source %q: got %v, want an error with %q", tc.spec, err, tc.want)
		}
	}
}

func TestBufferSmallerThanABatch(t *testing.T) {
	cfg := config(producer.NewSynthetic(4, 2), 4, 1, 1)
	_, err := producer.New(cfg, batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()-1)), memfile.NewMemFD())
	if err == nil || !strings.Contains(err.Error(), "smaller than one batch") {
		t.Fatalf("got %v", err)
	}
}

func TestDecodersAgreeOnContent(t *testing.T) {
	dir := producertest.Folder(t, 6, 2)
	src, err := producer.ScanFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got [2][]*producer.Batch
	for i, dec := range []string{producer.DecoderTurbo, producer.DecoderGo} {
		cfg := config(src, 6, 1, 1)
		cfg.Transform, cfg.Decoder, cfg.ImageSize = producer.Eval, dec, 24
		got[i] = produce(t, cfg)
	}
	// DCT-domain scaling and the decoders' rounding move single pixels of
	// these noisy pictures (by ~10, the noise's size), never the picture:
	// every sample's mean colour must agree.
	per := len(got[0][0].Images) / 6
	plane := per / 3
	for i := 0; i < 6; i++ {
		for c := 0; c < 3; c++ {
			mean := func(b []byte) float64 {
				var s int
				for _, v := range b[i*per+c*plane : i*per+(c+1)*plane] {
					s += int(v)
				}
				return float64(s) / float64(plane)
			}
			if a, b := mean(got[0][0].Images), mean(got[1][0].Images); a-b > 3 || b-a > 3 {
				t.Fatalf("sample %d channel %d: mean %.1f with libjpeg-turbo, %.1f with Go", i, c, a, b)
			}
		}
	}
}

func TestUnknownDecoderIsRefused(t *testing.T) {
	cfg := config(producer.NewSynthetic(4, 2), 2, 1, 1)
	cfg.Decoder = "magic"
	if _, err := producer.New(cfg, batchstore.New(producer.StoreConfig(cfg, 1<<20)), memfile.NewMemFD()); err == nil {
		t.Fatal("decoder magic accepted")
	}
}
