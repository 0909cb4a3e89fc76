package gpu_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/gpu"
)

// BenchmarkUpload is the host→device copy of one batch (256 images of
// 224×224×3, 38.5 MB) from each kind of host memory, the kinds interleaved
// batch by batch so that they share the machine's luck:
//
//   - pageable: a new batch file's own mapping, as the producer writes it
//     (tmpfs with huge pages where root, else a memfd): what tsock did
//   - staged: the same through a Stager (two page-locked 8 MiB buffers)
//   - registered: the same, page-locked for the copy (cuMemHostRegister,
//     copy, unregister: the whole cost, per batch)
//   - registered-ro: the same on a read-only mapping, as ingested files are
//   - pinned: page-locked memory from cuMemHostAlloc: the link's limit
//   - pool: Pool.Upload, what tsock does
//
// Each reports GB/s. It needs a CUDA driver (TSOCK_LIBCUDA names another
// library, such as the tests' fake); without one it is skipped.
func BenchmarkUpload(b *testing.B) {
	d, err := gpu.OpenCUDA(os.Getenv("TSOCK_LIBCUDA"), gpu.DeviceSpec{})
	if errors.Is(err, gpu.ErrNoDriver) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	host := d.(gpu.HostMemory)
	const size = 256 * 224 * 224 * 3
	dev, err := d.Alloc(size)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Free(dev)
	files, err := memfile.NewTmpfs(os.TempDir())
	if err != nil {
		files = memfile.NewMemFD()
	}
	defer files.Close()
	b.Logf("device %s; batch memory %s", d.Info().Name, files.Describe())
	pinned, err := host.AllocHost(size)
	if err != nil {
		b.Fatal(err)
	}
	defer host.FreeHost(pinned)
	pool, err := gpu.NewPool(d, size, size)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	b.Logf("the pool uploads %s", pool.UploadPath())
	st, err := host.NewStager(8 << 20)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()

	registered := func(readOnly bool) func(f *memfile.File) error {
		return func(f *memfile.File) error {
			data := f.Bytes()
			if readOnly {
				ro, unmap, err := f.MapRead()
				if err != nil {
					return err
				}
				defer unmap()
				data = ro
			}
			if err := host.RegisterHost(data, readOnly); err != nil {
				return err
			}
			return errors.Join(d.CopyToDevice(dev, data), host.UnregisterHost(data))
		}
	}
	kinds := []struct {
		name string
		copy func(f *memfile.File) error
	}{
		{"pageable", func(f *memfile.File) error { return d.CopyToDevice(dev, f.Bytes()) }},
		{"staged", func(f *memfile.File) error { return st.CopyToDevice(dev, f.Bytes()) }},
		{"registered", registered(false)},
		{"registered-ro", registered(true)},
		{"pinned", func(*memfile.File) error { return d.CopyToDevice(dev, pinned) }},
		{"pool", func(f *memfile.File) error { // what tsock does
			s, err := pool.Upload(context.Background(), f.Bytes())
			if err == nil {
				pool.Release(s)
			}
			return err
		}},
	}
	spent := make([]time.Duration, len(kinds))
	for i := range pinned {
		pinned[i] = byte(i)
	}
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range kinds {
			k := (i + j) % len(kinds) // each kind goes first in turn
			f, err := files.Create(size)
			if err != nil {
				b.Fatal(err)
			}
			copy(f.Bytes(), pinned) // the producer has just written it
			start := time.Now()
			if err := kinds[k].copy(f); err != nil {
				b.Fatalf("%s: %v", kinds[k].name, err)
			}
			spent[k] += time.Since(start)
			if err := f.Free(); err != nil {
				b.Fatal(err)
			}
		}
	}
	for k, kind := range kinds {
		b.ReportMetric(float64(size)*float64(b.N)/spent[k].Seconds()/1e9, kind.name+"-GB/s")
	}
}
