package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
)

// Slab is one piece of the pool's device memory.
type Slab struct {
	ID     int
	Ptr    uint64 // its device address in this process
	Offset int64  // from the start of the pool's allocation, which Handle exports
	Size   int64
	Handle IPCHandle
}

// Pool is a fixed set of equal slabs carved from one allocation made at
// start, exported by one IPC handle: allocating per batch would put the
// driver on the producer's path, and an allocation per slab (as tsock
// first did) costs each consumer one IPC open per slab (1363 for a 512 MiB
// pool of small batches, on an H100) and each slab the driver's rounding.
// A batch takes one slab; freeing the batch returns it.
type Pool struct {
	d     Driver
	base  uint64
	slabs []*Slab
	free  chan *Slab
	// registered: batch memory is page-locked for each upload (the DMA
	// engine reads it directly) until registration fails once.
	registered atomic.Bool
	whyNot     atomic.Pointer[string]
}

// slabAlign keeps every slab, and so every tensor at an aligned offset in
// its batch, aligned on the device.
const slabAlign = 4096

// NewPool allocates total/slabSize slabs of slabSize bytes on d, each at a
// page-aligned offset: the allocation exceeds total by less than a page
// per slab, so that --gpu-buffer holds as many batches as it says.
func NewPool(d Driver, total, slabSize int64) (*Pool, error) {
	if slabSize <= 0 || slabSize > total {
		return nil, fmt.Errorf("GPU buffer of %d bytes holds no slab of %d bytes (one batch): raise --gpu-buffer", total, slabSize)
	}
	stride := (slabSize + slabAlign - 1) / slabAlign * slabAlign
	n := total / slabSize
	base, err := d.Alloc(n * stride)
	if err != nil {
		return nil, fmt.Errorf("allocate %d GPU slabs of %d bytes: %w", n, slabSize, err)
	}
	h, err := d.IPCHandle(base)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("export GPU slabs: %w", err), d.Free(base))
	}
	p := &Pool{d: d, base: base, free: make(chan *Slab, n)}
	for i := range n {
		s := &Slab{ID: int(i), Ptr: base + uint64(i*stride), Offset: i * stride, Size: slabSize, Handle: h}
		p.slabs = append(p.slabs, s)
		p.free <- s
	}
	_, canRegister := d.(HostMemory)
	p.registered.Store(canRegister)
	return p, nil
}

// Driver is the pool's driver.
func (p *Pool) Driver() Driver { return p.d }

// Slabs are every slab, in id order.
func (p *Pool) Slabs() []*Slab { return p.slabs }

// InUse is the number of slabs holding a batch.
func (p *Pool) InUse() int { return len(p.slabs) - len(p.free) }

// UploadPath says how batches reach the device, for status.
func (p *Pool) UploadPath() string {
	if p.registered.Load() {
		return "page-locked per batch (cuMemHostRegister)"
	}
	if why := p.whyNot.Load(); why != nil {
		return "pageable (" + *why + ")"
	}
	return "pageable"
}

// Upload copies data into a free slab, waiting for one, and returns it
// once the bytes are on the device. ctx bounds only the wait: a free
// slab is taken whatever ctx says. (An ingested batch is uploaded in its
// writer's close, whose context FUSE ends when the writer gets any
// signal, Go's preemption signals among them; a select over both took
// the ended context half the time with slabs free, refusing the batch.)
func (p *Pool) Upload(ctx context.Context, data []byte) (*Slab, error) {
	if int64(len(data)) > p.slabs[0].Size {
		return nil, fmt.Errorf("upload %d bytes into %d-byte slabs", len(data), p.slabs[0].Size)
	}
	var s *Slab
	select {
	case s = <-p.free:
	default:
		select {
		case s = <-p.free:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := p.copyIn(s.Ptr, data); err != nil {
		p.free <- s
		return nil, fmt.Errorf("upload to GPU slab %d: %w", s.ID, err)
	}
	return s, nil
}

// copyIn copies data to the device. From pageable memory the driver copies
// through its own staging buffers: on an H100 (PCIe 5) 11 GB/s, against
// 52 from page-locked memory; page-locking the batch for the copy, its
// cost included, gave 15-16 (BenchmarkUpload). Read-only registration
// serves both the daemon's own mappings and ingested files' read-only ones.
func (p *Pool) copyIn(dst uint64, data []byte) error {
	if len(data) > 0 && p.registered.Load() {
		hm := p.d.(HostMemory)
		if err := hm.RegisterHost(data, true); err == nil {
			return errors.Join(p.d.CopyToDevice(dst, data), hm.UnregisterHost(data))
		} else if p.registered.CompareAndSwap(true, false) {
			why := "page-locking failed: " + err.Error()
			p.whyNot.Store(&why)
		}
	}
	return p.d.CopyToDevice(dst, data)
}

// Release returns a slab to the pool.
func (p *Pool) Release(s *Slab) { p.free <- s }

// Close frees the slabs' memory. Consumers that opened the handle keep
// their mapping until they close it, but the memory is the driver's to
// reuse.
func (p *Pool) Close() error {
	if p.slabs == nil {
		return nil
	}
	p.slabs = nil
	if err := p.d.Free(p.base); err != nil {
		return fmt.Errorf("free GPU slabs: %w", err)
	}
	return nil
}
