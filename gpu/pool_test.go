package gpu_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/gpu/gputest"
)

func TestPoolAllocatesOnceUploadsAndFrees(t *testing.T) {
	d := gputest.NewDriver()
	p, err := gpu.NewPool(d, 3*1000+999, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Slabs()) != 3 || d.Live() != 3 {
		t.Fatalf("%d slabs, %d allocations: want 3 and 3", len(p.Slabs()), d.Live())
	}
	seen := map[gpu.IPCHandle]bool{}
	for _, s := range p.Slabs() {
		seen[s.Handle] = true
	}
	if len(seen) != 3 {
		t.Fatal("slabs share an IPC handle")
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
	d.AllocLimit = 2
	if _, err := gpu.NewPool(d, 5000, 1000); err == nil {
		t.Fatal("a pool the device cannot hold was made")
	}
	if d.Live() != 0 {
		t.Fatalf("%d allocations left by a failed pool", d.Live())
	}
}
