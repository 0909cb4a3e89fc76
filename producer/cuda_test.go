package producer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/gpu/gputest"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

type cudaJSON struct {
	Device  string `json:"device"`
	Epoch   int    `json:"epoch"`
	Batch   int    `json:"batch"`
	Samples int    `json:"samples"`
	Tensors []struct {
		Name     string `json:"name"`
		Dtype    string `json:"dtype"`
		Shape    []int  `json:"shape"`
		Segments []struct {
			Slab          int
			Offset, Bytes int64
		} `json:"segments"`
	} `json:"tensors"`
}

// Every batch's tensors are on the GPU where its .cuda file says, for a
// consumer of the producer's batches and for a re-batched one; the slab
// pool, smaller than the host buffer, bounds the producer; freed batches
// give their slabs back.
func TestBatchesGoToTheGPUWhereCUDAFilesSay(t *testing.T) {
	d := gputest.NewDriver()
	cfg := producertest.Config(source.NewSynthetic(20, 2), 4, 2, 2)
	slab := cfg.BatchBytes() - batchfile.DataStart
	pool, err := gpu.NewPool(d, 3*slab, slab)
	if err != nil {
		t.Fatal(err)
	}
	cfg.GPU = pool
	store := batchstore.New(producer.StoreConfig(cfg, 8*cfg.BatchBytes()))
	p, err := producer.New(cfg, store, memfile.NewMemFD())
	if err != nil {
		t.Fatal(err)
	}
	files := batchfile.NewCUDAFiles(pool)
	for name, size := range map[string]int{"same": 4, "own": 3} {
		if err := store.Join(name); err != nil {
			t.Fatal(err)
		}
		if err := store.SetBatchSize(name, size); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var wg sync.WaitGroup
	read := map[string]int{}
	var mu sync.Mutex
	for _, name := range []string{"same", "own"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for local := uint64(0); ; local++ {
				ref, err := store.Lookup(ctx, name, local, batchstore.CallerID(len(name)))
				if errors.Is(err, batchstore.ErrNotFound) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				if err := checkOnGPU(d, pool, files, store, name, ref); err != nil {
					t.Errorf("%s/%d: %v", name, local, err)
					return
				}
				mu.Lock()
				read[name] += ref.Samples
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if read["same"] != 40 || read["own"] != 40 {
		t.Fatalf("samples read: %v, want 40 each (2 epochs of 20)", read)
	}
	cancel() // the producer idles, waiting for late joiners, until stopped
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if pool.InUse() != 0 {
		t.Fatalf("%d slabs still in use after every batch was consumed", pool.InUse())
	}
	store.Close()
	if err := pool.Close(); err != nil || d.Live() != 0 {
		t.Fatalf("pool close: %v, %d allocations left", err, d.Live())
	}
}

// checkOnGPU leases name's batch ref and compares its .cuda segments'
// device bytes with its file's tensors.
func checkOnGPU(d *gputest.Driver, pool *gpu.Pool, files batchfile.CUDAFiles,
	store *batchstore.Store, name string, ref batchstore.Ref) error {
	lease, err := store.OpenBatch(name, ref.Local)
	if err != nil {
		return err
	}
	defer lease.Release()
	size, err := files.Size(ref, name)
	if err != nil {
		return err
	}
	body, err := files.Render(ref, lease.Blobs(), name)
	if err != nil {
		return err
	}
	if int64(len(body)) != size {
		return errorf("rendered %d bytes, Size said %d", len(body), size)
	}
	var cf cudaJSON
	if err := json.Unmarshal(body, &cf); err != nil {
		return err
	}
	comp, err := batchfile.Compose(ref, lease.Blobs(), name)
	if err != nil {
		return err
	}
	raw := make([]byte, comp.Size())
	if _, err := comp.ReadAt(raw, 0); err != nil {
		return err
	}
	b, err := batchfile.ParseBatch(raw)
	if err != nil {
		return err
	}
	if cf.Device != gputest.FakeUUID(0) || cf.Samples != ref.Samples || cf.Epoch != b.Epoch || cf.Batch != b.Index {
		return errorf("header %+v for a batch of %d samples, epoch %d, index %d", cf, ref.Samples, b.Epoch, b.Index)
	}
	want := map[string][]byte{"labels": batchfile.Int64s(b.Labels...), "indices": batchfile.Int64s(b.Indices...), "images": b.Images}
	if len(cf.Tensors) != len(want) {
		return errorf("%d tensors in the .cuda file, want %d", len(cf.Tensors), len(want))
	}
	for _, ct := range cf.Tensors {
		tensor := ct.Name
		var got []byte
		for _, s := range ct.Segments {
			part := make([]byte, s.Bytes)
			if err := d.CopyToHost(part, pool.Slabs()[s.Slab].Ptr+uint64(s.Offset)); err != nil {
				return err
			}
			got = append(got, part...)
		}
		if string(got) != string(want[tensor]) {
			return errorf("%s on the GPU differ from the file (%d segments)", tensor, len(ct.Segments))
		}
	}
	return nil
}

var errorf = fmt.Errorf
