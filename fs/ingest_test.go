package fs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/fs"
)

// slowReleases is an ingest side that refuses every batch at close and
// holds each writer's release until let is closed: the kernel sends a
// release after close(2) has returned, so it may come arbitrarily late.
type slowReleases struct {
	alloc   *memfile.Allocator
	let     chan struct{}
	mu      sync.Mutex
	writing bool
	creates int
}

func (s *slowReleases) Create(ctx context.Context, seq uint64) (fs.IngestWriter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writing {
		return nil, batchstore.ErrWriting
	}
	f, err := s.alloc.CreateEmpty()
	if err != nil {
		return nil, err
	}
	s.writing = true
	s.creates++
	return &refusedWriter{File: f, s: s}, nil
}
func (s *slowReleases) Next() uint64                          { return 0 }
func (s *slowReleases) Order(context.Context) ([]byte, error) { return nil, nil }
func (s *slowReleases) Skip(string) error                     { return nil }
func (s *slowReleases) Status() ([]byte, error)               { return nil, nil }
func (s *slowReleases) Refusal() ([]byte, error)              { return nil, nil }
func (s *slowReleases) SamplesText() ([]byte, error)          { return nil, nil }
func (s *slowReleases) Grow(string) error                     { return nil }

type refusedWriter struct {
	*memfile.File
	s        *slowReleases
	finished bool // under s.mu
}

func (w *refusedWriter) WriteAt(_ context.Context, p []byte, off int64) (int, error) {
	return w.File.WriteAt(p, off)
}
func (w *refusedWriter) Size() int64 { n, _ := w.Stat(); return n }
func (w *refusedWriter) Truncate(_ context.Context, n int64) error {
	return w.SetSize(n)
}

func (w *refusedWriter) Close(ctx context.Context) error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if n, _ := w.Stat(); n == 0 || w.finished {
		return nil
	}
	w.finished, w.s.writing = true, false
	return fmt.Errorf("%w: refused by the test", batchstore.ErrBadBatch)
}

func (w *refusedWriter) Finished() bool {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.finished
}

func (w *refusedWriter) Release(context.Context) {
	<-w.s.let
	w.Free()
}

// TestARefusedBatchCanBeWrittenAgainAtOnce: a writer whose close was
// refused writes the same name again straight away, before the kernel's
// release of the first file has reached the daemon. (It used to get
// EBUSY: the name still led to the first, finished file.)
func TestARefusedBatchCanBeWrittenAgainAtOnce(t *testing.T) {
	for _, pt := range []bool{true, false} {
		t.Run(fmt.Sprintf("passthrough=%v", pt), func(t *testing.T) {
			in := &slowReleases{alloc: memfile.NewMemFD(), let: make(chan struct{})}
			e := mount(t, pt, func(o *fs.Options) { o.Ingest = in })
			t.Cleanup(func() { close(in.let) }) // runs before the unmount
			name := e.path("ingest", fs.BatchName(0))
			for try := 1; try <= 3; try++ {
				err := os.WriteFile(name, []byte("not a batch"), 0o644)
				if !errors.Is(err, syscall.EINVAL) {
					t.Fatalf("write %d: got %v, want the refusal (EINVAL)", try, err)
				}
			}
			in.mu.Lock()
			defer in.mu.Unlock()
			if in.creates != 3 {
				t.Fatalf("%d creates reached the ingest side, want 3", in.creates)
			}
		})
	}
}
