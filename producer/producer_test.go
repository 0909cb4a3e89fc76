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

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

func TestEpochsAreExact(t *testing.T) {
	src := source.NewSynthetic(37, 4)
	got := producertest.Produce(t, producertest.Config(src, 8, 3, 3))
	want := producertest.Stream{Good: producertest.All(37), Label: src.Label, BatchSize: 8, Epochs: 3}
	if err := want.Check(got); err != nil {
		t.Fatal(err)
	}
	if first, second := got[0].Indices, got[5].Indices; fmt.Sprint(first) == fmt.Sprint(second) {
		t.Fatal("epochs 0 and 1 start with the same order: no reshuffle")
	}
}

func TestSameBytesWhateverTheWorkers(t *testing.T) {
	src := source.NewSynthetic(20, 3)
	producertest.EqualBatches(t, producertest.Produce(t, producertest.Config(src, 6, 2, 1)), producertest.Produce(t, producertest.Config(src, 6, 2, 4)), "1 and 4 workers")
}

func TestEvalIsInOrder(t *testing.T) {
	src := source.NewSynthetic(10, 2)
	cfg := producertest.Config(src, 4, 1, 2)
	cfg.Transform = pipeline.Eval
	got := producertest.Produce(t, cfg)
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
	src, err := source.Open(context.Background(), dir, source.Options{})
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
	for _, dec := range []string{pipeline.DecoderTurbo, pipeline.DecoderGo} {
		t.Run(dec, func(t *testing.T) { badInputs(t, dec) })
	}
}

func badInputs(t *testing.T, decoder string) {
	dir := producertest.Folder(t, 12, 3)
	bad, tiny := producertest.BadFiles(t, dir, "class001")
	src, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := producertest.Config(src, 5, 2, 2)
	cfg.Decoder = decoder
	store := batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()*4))
	p, err := producer.New(cfg, store, memfile.NewMemFD())
	if err != nil {
		t.Fatalf("decoder %s: %v", decoder, err)
	}
	got := producertest.ProduceWith(t, p, store)
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

func names(src source.Source, idx []int) []string {
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
	src, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := producertest.Config(src, 2, 3, 1)
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
		_, err := source.Open(context.Background(), tc.spec, source.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("source %q: got %v, want an error with %q", tc.spec, err, tc.want)
		}
	}
}

func TestBufferSmallerThanABatch(t *testing.T) {
	cfg := producertest.Config(source.NewSynthetic(4, 2), 4, 1, 1)
	_, err := producer.New(cfg, batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()-1)), memfile.NewMemFD())
	if err == nil || !strings.Contains(err.Error(), "smaller than one batch") {
		t.Fatalf("got %v", err)
	}
}

func TestDecodersAgreeOnContent(t *testing.T) {
	dir := producertest.Folder(t, 6, 2)
	src, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got [2][]*batchfile.Batch
	for i, dec := range []string{pipeline.DecoderTurbo, pipeline.DecoderGo} {
		cfg := producertest.Config(src, 6, 1, 1)
		cfg.Transform, cfg.Decoder, cfg.ImageSize = pipeline.Eval, dec, 24
		got[i] = producertest.Produce(t, cfg)
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
	cfg := producertest.Config(source.NewSynthetic(4, 2), 2, 1, 1)
	cfg.Decoder = "magic"
	if _, err := producer.New(cfg, batchstore.New(producer.StoreConfig(cfg, 1<<20)), memfile.NewMemFD()); err == nil {
		t.Fatal("decoder magic accepted")
	}
}
