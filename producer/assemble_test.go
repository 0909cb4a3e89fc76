package producer

import (
	"context"
	"testing"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/source"
)

// BenchmarkAssemble is one batch of 256 samples of 224×224 past decoding:
// reserve room, allocate the memory file, copy the samples in, write the
// header, publish; a consumer then unlinks it, so its memory is freed.
func BenchmarkAssemble(b *testing.B) {
	b.Run("memfd", func(b *testing.B) { benchAssemble(b, memfile.NewMemFD()) })
	b.Run("tmpfs", func(b *testing.B) {
		alloc, err := memfile.NewTmpfs(b.TempDir())
		if err != nil {
			b.Skipf("SKIPPED: %v (needs root)", err)
		}
		defer alloc.Close()
		benchAssemble(b, alloc)
	})
}

func benchAssemble(b *testing.B, alloc *memfile.Allocator) {
	const B, S = 256, 224
	cfg := Config{Source: source.NewSynthetic(B, 4), BatchSize: B, ImageSize: S, Workers: 1,
		Layout: pipeline.NCHW, Transform: pipeline.Train}
	store := batchstore.New(StoreConfig(cfg, 2*cfg.BatchBytes()))
	defer store.Close()
	if err := store.Join("reader"); err != nil {
		b.Fatal(err)
	}
	p, err := New(cfg, store, alloc)
	if err != nil {
		b.Fatal(err)
	}
	a := &assembler{p: p}
	defer a.abandon()
	sample := make([]byte, 3*S*S)
	ctx := context.Background()
	var order []int
	for e := 0; b.Loop(); e++ {
		order = p.fixOrder(e, order)
		for pos, index := range order {
			t := &task{epoch: e, index: index, pos: pos, epochLen: len(order), last: pos == len(order)-1, buf: sample}
			if err := a.add(ctx, t); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := store.Lookup(ctx, "reader", uint64(e), 1); err != nil {
			b.Fatal(err)
		}
		if err := store.Unlink("reader", uint64(e)); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(cfg.BatchBytes())
}
