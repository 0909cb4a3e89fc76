package batchstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/tsock/tsock/batchstore"
)

type benchBlob struct{ size int64 }

func (b benchBlob) Size() int64                             { return b.size }
func (b benchBlob) Fd() int                                 { return -1 }
func (b benchBlob) ReadAt(p []byte, off int64) (int, error) { return len(p), nil }
func (b benchBlob) Free() error                             { return nil }

// BenchmarkStoreRoundTrip is the core's cost per batch, the producer
// and its consumers together: reserve and publish, then each consumer's
// lookup, open and release, in a buffer of 8 batches. An op is one batch
// (all its sides); it measures the store's locking and bookkeeping (the
// planner's decisions included), never bytes. 200 consumers: a sweep's
// worth, where what is decided per consumer under the one lock shows.
func BenchmarkStoreRoundTrip(b *testing.B) {
	for _, consumers := range []int{1, 4, 200} {
		b.Run(fmt.Sprintf("consumers=%d", consumers), func(b *testing.B) {
			const size = 1 << 10
			s := batchstore.New(batchstore.Config{Limit: 8 * size, BatchSize: 4, SizeOf: func(n int) int64 { return size }})
			defer s.Close()
			names := make([]string, consumers)
			for i := range names {
				names[i] = fmt.Sprintf("c%d", i)
				if err := s.Join(names[i]); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			var wg sync.WaitGroup
			errs := make(chan error, consumers)
			b.ResetTimer()
			for i, name := range names {
				wg.Add(1)
				go func(name string, caller batchstore.CallerID) {
					defer wg.Done()
					for j := 0; j < b.N; j++ {
						ref, err := s.Lookup(ctx, name, uint64(j), caller)
						if err != nil {
							errs <- err
							return
						}
						var l *batchstore.Lease
						if ref.Direct {
							l, err = s.Open(ref.Seq, caller)
						} else {
							l, err = s.OpenBatch(name, ref.Local)
						}
						if err != nil {
							errs <- err
							return
						}
						l.Release()
					}
				}(name, batchstore.CallerID(i+1))
			}
			for j := 0; j < b.N; j++ {
				r, err := s.Reserve(ctx, size)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.Publish(benchBlob{size}, batchstore.Info{Epoch: 0, Index: j, Samples: 4, FirstPos: 4 * j, EndPos: 4*j + 4}); err != nil {
					b.Fatal(err)
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		})
	}
}
