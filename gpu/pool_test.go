package gpu_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/gpu/gputest"
)

func TestPoolAllocatesOnceUploadsAndFrees(t *testing.T) {
	d := gputest.NewDriver()
	p, err := gpu.NewPool(d, 3*1000+999, 1000) // as many batches as the buffer holds, page-aligned
	if err != nil {
		t.Fatal(err)
	}
	// One allocation, one handle: each consumer opens it once (an
	// allocation per slab meant 1363 opens per consumer on an H100).
	if len(p.Slabs()) != 3 || d.Live() != 1 {
		t.Fatalf("%d slabs, %d allocations: want 3 and 1", len(p.Slabs()), d.Live())
	}
	for i, s := range p.Slabs() {
		first := p.Slabs()[0]
		if s.Handle != first.Handle || s.Offset != int64(i)*4096 || s.Ptr != first.Ptr+uint64(s.Offset) || s.Size != 1000 {
			t.Fatalf("slab %d: %+v; slab 0: %+v", i, s, first)
		}
	}
	ctx := context.Background()
	var got []*gpu.Slab
	for i := range 3 {
		s, err := p.Upload(ctx, bytes.Repeat([]byte{byte(i)}, 500))
		if err != nil {
			t.Fatal(err)
		}
		back := make([]byte, 500)
		if err := d.CopyToHost(back, s.Ptr); err != nil || back[499] != byte(i) {
			t.Fatalf("slab %d holds %v, %v", s.ID, back[499], err)
		}
		got = append(got, s)
	}
	// A fourth waits for a slab to come back.
	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := p.Upload(waitCtx, []byte{1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("upload with every slab in use: %v, want to wait", err)
	}
	p.Release(got[1])
	// A free slab is taken however ended ctx is: ctx bounds the wait alone
	// (tried 200 times: a select over both took the ended one about half
	// of them).
	ended, end := context.WithCancel(ctx)
	end()
	for range 200 {
		s, err := p.Upload(ended, []byte{9})
		if err != nil || s != got[1] {
			t.Fatalf("upload with a slab free and its context ended: %+v %v", s, err)
		}
		p.Release(s)
	}
	if s, err := p.Upload(ctx, []byte{9}); err != nil || s != got[1] {
		t.Fatalf("upload after a release: %+v %v", s, err)
	}
	if _, err := p.Upload(ctx, make([]byte, 1001)); err == nil {
		t.Fatal("an upload larger than a slab was accepted")
	}
	if err := p.Close(); err != nil || d.Live() != 0 {
		t.Fatalf("close: %v, %d allocations left", err, d.Live())
	}
}

func TestPoolErrors(t *testing.T) {
	d := gputest.NewDriver()
	if _, err := gpu.NewPool(d, 999, 1000); err == nil {
		t.Fatal("a buffer smaller than one slab was accepted")
	}
	d.AllocLimit = 0
	if _, err := gpu.NewPool(d, 5000, 1000); err == nil {
		t.Fatal("a pool the device cannot hold was made")
	}
	if d.Live() != 0 {
		t.Fatalf("%d allocations left by a failed pool", d.Live())
	}
}

// Uploads page-lock the batch for the copy (the DMA engine then reads it
// directly: 1.4x faster on an H100), from any offset in its mapping; where
// page-locking fails, they copy from pageable memory and status says why.
func TestPoolUploadPaths(t *testing.T) {
	mapping, err := unix.Mmap(-1, 0, 3*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mapping)
	data := mapping[100 : 100+5000] // a data section starts inside its file's first page
	rand.NewChaCha8([32]byte{1}).Read(data)
	for _, c := range []struct {
		name, want string
		cflags     []string
		env        string
	}{
		{"registered", "page-locked per batch (cuMemHostRegister)", nil, ""},
		{"registration fails", "pageable (page-locking failed: cuMemHostRegister 5000 bytes: CUDA_ERROR_NOT_SUPPORTED (801))", nil, "1"},
		{"no host memory calls", "pageable (page-locking failed: cuMemHostRegister 5000 bytes: CUDA_ERROR_NOT_SUPPORTED (801))", []string{"-DNO_HOST"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FAKECUDA_REGISTER_FAILS", c.env)
			d, err := gpu.OpenCUDA(gputest.LibCUDA(t, c.cflags...), gpu.DeviceSpec{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			p, err := gpu.NewPool(d, 2*8192, 8000)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for range 2 { // the second upload takes the path the first chose
				s, err := p.Upload(context.Background(), data)
				if err != nil {
					t.Fatal(err)
				}
				back := make([]byte, len(data))
				if err := d.CopyToHost(back, s.Ptr); err != nil || !bytes.Equal(back, data) {
					t.Fatalf("the slab holds other bytes (%v)", err)
				}
				p.Release(s)
			}
			if got := p.UploadPath(); got != c.want {
				t.Fatalf("upload path %q, want %q", got, c.want)
			}
		})
	}
}
