package gpu

import (
	"context"
	"errors"
	"fmt"
)

// Slab is one piece of device memory of the pool, exported once.
type Slab struct {
	ID     int
	Ptr    uint64
	Size   int64
	Handle IPCHandle
}

// Pool is a fixed set of equal slabs, allocated once at start: allocating
// per batch would put the driver on the producer's path and fragment the
// device, and each allocation would need a handle of its own that every
// consumer opens again. A batch takes one slab; freeing the batch returns it.
type Pool struct {
	d     Driver
	slabs []*Slab
	free  chan *Slab
}

// NewPool allocates total/slabSize slabs of slabSize bytes on d.
func NewPool(d Driver, total, slabSize int64) (*Pool, error) {
	n := total / slabSize
	if slabSize <= 0 || n < 1 {
		return nil, fmt.Errorf("GPU buffer of %d bytes holds no slab of %d bytes (one batch): raise --gpu-buffer", total, slabSize)
	}
	p := &Pool{d: d, free: make(chan *Slab, n)}
	for i := range int(n) {
		ptr, err := d.Alloc(slabSize)
		if err == nil {
			var h IPCHandle
			h, err = d.IPCHandle(ptr)
			if err != nil {
				d.Free(ptr)
			}
			p.slabs = append(p.slabs, &Slab{ID: i, Ptr: ptr, Size: slabSize, Handle: h})
		}
		if err != nil {
			p.slabs = p.slabs[:i]
			return nil, errors.Join(fmt.Errorf("allocate GPU slab %d of %d: %w", i, n, err), p.Close())
		}
	}
	for _, s := range p.slabs {
		p.free <- s
	}
	return p, nil
}

// Driver is the pool's driver.
func (p *Pool) Driver() Driver { return p.d }

// Slabs are every slab, in id order.
func (p *Pool) Slabs() []*Slab { return p.slabs }

// InUse is the number of slabs holding a batch.
func (p *Pool) InUse() int { return len(p.slabs) - len(p.free) }

// Upload copies data into a free slab, waiting for one, and returns it
// once the bytes are on the device.
func (p *Pool) Upload(ctx context.Context, data []byte) (*Slab, error) {
	if int64(len(data)) > p.slabs[0].Size {
		return nil, fmt.Errorf("upload %d bytes into %d-byte slabs", len(data), p.slabs[0].Size)
	}
	var s *Slab
	select {
	case s = <-p.free:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := p.d.CopyToDevice(s.Ptr, data); err != nil {
		p.free <- s
		return nil, fmt.Errorf("upload to GPU slab %d: %w", s.ID, err)
	}
	return s, nil
}

// Release returns a slab to the pool.
func (p *Pool) Release(s *Slab) { p.free <- s }

// Close frees every slab. Consumers that opened a handle keep their
// mapping until they close it, but the memory is the driver's to reuse.
func (p *Pool) Close() error {
	var errs []error
	for _, s := range p.slabs {
		if err := p.d.Free(s.Ptr); err != nil {
			errs = append(errs, fmt.Errorf("free GPU slab %d: %w", s.ID, err))
		}
	}
	p.slabs = nil
	return errors.Join(errs...)
}
