package main

// Ingest of every dtype, and onto the GPU.

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/fs"
)

// TestIngestEveryDtypeBothReadPaths: a batch of every dtype reaches a
// consumer byte for byte, read by passthrough and by daemon reads
// (--passthrough off); either way its writes came to the daemon, as
// status says.
func TestIngestEveryDtypeBothReadPaths(t *testing.T) {
	t.Parallel() // see parallelTests
	for _, mode := range []string{"auto", "off"} {
		d := startDaemon(t, "--ingest", "--buffer", "1MiB", "--passthrough", mode)
		var tensors []batchfile.TensorData
		for _, dt := range []string{"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"} {
			size := batchfile.Dtypes[dt]
			data := make([]byte, 3*2*size)
			for i := range data {
				data[i] = byte(i*7+len(dt)) & 1
			}
			tensors = append(tensors, batchfile.TensorData{Name: strings.ToLower(dt), Dtype: dt, Shape: []int64{3, 2}, Data: data})
		}
		if err := os.Mkdir(filepath.Join(d.dir, "consumers", "c"), 0o755); err != nil {
			t.Fatal(err)
		}
		batch, err := batchfile.Build(map[string]string{"last": "true"}, tensors, 8)
		if err != nil {
			t.Fatal(err)
		}
		if err := publish(d, 0, batch); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(d.dir, "consumers", "c", fs.BatchName(0)))
		if err != nil {
			t.Fatal(err)
		}
		h, err := batchfile.ParseBytes(got)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range tensors {
			tn := h.Tensor(want.Name)
			if tn == nil || tn.Dtype != want.Dtype || !bytes.Equal(got[h.DataStart+tn.Begin:h.DataStart+tn.End], want.Data) {
				t.Fatalf("%s: tensor %s differs", mode, want.Name)
			}
		}
		st := readFile(t, filepath.Join(d.dir, "ingest", "status"))
		wantPath := "daemon writes into"
		if !strings.Contains(st, wantPath) || strings.Contains(st, "(0 so far)") {
			t.Fatalf("--passthrough %s: ingest/status does not say %q:\n%s", mode, wantPath, st)
		}
		d.stop(t)
	}
}

// TestIngestedBatchesOnTheGPU: in GPU mode (the fake driver) ingested
// batches are copied to slabs, and every .cuda segment holds the
// consumer's bytes, for a re-cut consumer too; ragged offsets come by
// value.
func TestIngestedBatchesOnTheGPU(t *testing.T) {
	mnt, drv := mountWithFakeGPU(t, "--ingest", "--samples", "12", "--order", "sequential", "--batch-size", "4",
		"--buffer", "1MiB", "--device", "GPU-anything", "--gpu-slab", "64KiB")
	d := &mountProc{dir: mnt}
	if err := os.Mkdir(filepath.Join(mnt, "consumers", "own"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(mnt, "consumers", "own", "batch_size"), []byte("5\n"), 0o644)
	readFile(t, filepath.Join(mnt, "ingest", "order"))
	for seq := int64(0); seq < 3; seq++ {
		if err := publish(d, uint64(seq), sampleBatch(t, nil, 4*seq, 4*seq+1, 4*seq+2, 4*seq+3)); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(0); i < 3; i++ {
		// Held open while the .cuda file is read: closing both consumes it.
		held, err := os.Open(filepath.Join(mnt, "consumers", "own", fs.BatchName(i)))
		if err != nil {
			t.Fatal(err)
		}
		cf := readCUDA(t, filepath.Join(mnt, "consumers", "own", fs.CUDAName(i)))
		file, err := io.ReadAll(held)
		held.Close()
		if err != nil {
			t.Fatal(err)
		}
		h, err := batchfile.ParseBytes(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range h.Tensors {
			want := file[h.DataStart+tn.Begin : h.DataStart+tn.End]
			ct := cf.tensor(tn.Name)
			var got []byte
			if tn.Name == "tok.offsets" {
				got = batchfile.Int64s(ct.Values...)
			}
			for _, s := range ct.Segments {
				part := make([]byte, s.Bytes)
				if err := drv.CopyToHost(part, cudaSlab(t, mnt, int(s.Slab))+uint64(s.Offset)); err != nil {
					t.Fatal(err)
				}
				got = append(got, part...)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("batch %d: %s on the GPU differs from the file", i, tn.Name)
			}
		}
	}
}
