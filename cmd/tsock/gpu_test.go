package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs"
	"github.com/tsock/tsock/fs/fusetest"
	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/gpu/gputest"
)

// cudaFile is a .cuda control file.
type cudaFile struct {
	Format, Device, Consumer string
	Epoch, Batch, Samples    int
	Tensors                  []cudaTensor
}

type cudaTensor struct {
	Name     string
	Dtype    string
	Shape    []int
	Segments []struct{ Slab, Offset, Bytes int64 }
	Values   []int64
}

// tensor is the named tensor's entry (empty if absent).
func (f cudaFile) tensor(name string) cudaTensor {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t
		}
	}
	return cudaTensor{}
}

func readCUDA(t *testing.T, path string) cudaFile {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(fh)
	if err != nil || st.Size() != int64(len(data)) {
		t.Fatalf("stat says %d bytes, read %d: %v", st.Size(), len(data), err)
	}
	var f cudaFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
	return f
}

// The built binary in GPU mode, through the real CUDA binding loading the
// fake libcuda.so.
func TestGPUModeWithAFakeLibCUDA(t *testing.T) {
	t.Setenv("TSOCK_LIBCUDA", gputest.LibCUDA(t))
	batch := batchfile.DataStart + 8*(16+3*16*16)
	d := startDaemon(t, "--source", "synthetic:40", "--batch-size", "8", "--image-size", "16",
		"--buffer", "1MiB", "--gpu-buffer", "4MiB", "--device", "cuda:0")
	slabs, err := os.ReadFile(filepath.Join(d.dir, "gpu", "slabs"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(slabs)), "\n")
	slabSize := batch - batchfile.DataStart
	stride := (slabSize + 4095) / 4096 * 4096 // slabs stay page-aligned
	if len(lines) != (4<<20)/slabSize {
		t.Fatalf("%d slabs listed, want %d:\n%s", len(lines), (4<<20)/slabSize, slabs)
	}
	handle := strings.Fields(lines[0])[1]
	for i, line := range lines {
		if f := strings.Fields(line); len(f) != 5 || f[0] != fmt.Sprint(i) || f[1] != handle || !strings.HasPrefix(f[1], "66616b65697063") ||
			f[2] != fmt.Sprint(slabSize) || f[3] != gputest.FakeUUID(0) || f[4] != fmt.Sprint(i*stride) {
			t.Fatalf("slab line %q: want id, the one handle (fakeipc…), size, UUID, offset %d", line, i*stride)
		}
	}
	devices, err := os.ReadFile(filepath.Join(d.dir, "gpu", "devices"))
	if err != nil || !strings.Contains(string(devices), "no NVIDIA driver") {
		t.Fatalf("gpu/devices without NVML: %q %v", devices, err)
	}
	dir := filepath.Join(d.dir, "consumers", "trial")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(filepath.Join(dir, fs.CUDAName(0))) // blocks until batch 0 is made
	if err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, n := range names {
		listed = append(listed, n.Name())
	}
	if !strings.Contains(strings.Join(listed, " "), "000000.cuda 000000.safetensors") {
		t.Fatalf("listing %v lacks the .cuda file beside the batch", listed)
	}
	f := readCUDA(t, filepath.Join(dir, fs.CUDAName(0)))
	held.Close()
	img := f.tensor("images")
	if f.Format != "tsock-cuda-2" || f.Device != gputest.FakeUUID(0) || f.Samples != 8 || f.Consumer != "trial" ||
		img.Dtype != "U8" || len(img.Segments) != 1 || img.Segments[0].Offset != 16*8 || img.Segments[0].Bytes != 8*3*16*16 {
		t.Fatalf(".cuda of batch 0: %+v", f)
	}
	// Reading the .cuda file consumed batch 0, as reading the batch would
	// (once the kernel's release, sent after close returns, arrives).
	waittest.Until(t, "batch 0 is consumed by its .cuda file's release", func() bool {
		_, err := os.Stat(filepath.Join(dir, fs.BatchName(0)))
		return errors.Is(err, os.ErrNotExist)
	})
	status, _ := os.ReadFile(filepath.Join(d.dir, "status"))
	for _, want := range []string{"gpu: " + gputest.FakeUUID(0) + " (Fake GPU 0, cuda:0): ", "gpu memory by consumer: unknown (no NVIDIA driver"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	var doc statusDoc
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(d.dir, "status.json"))), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.GPU == nil || doc.GPU.Name != "Fake GPU 0" || doc.GPU.Slabs != len(lines) || doc.GPU.SlabSize != int64(slabSize) ||
		len(doc.Consumers) != 1 || doc.Consumers[0].GPUMemory == nil || *doc.Consumers[0].GPUMemory != -1 {
		t.Errorf("status.json in GPU mode: %+v (gpu %+v)", doc, doc.GPU)
	}
	view, _, _ := tsockRun(context.Background(), "status", d.dir)
	if !strings.Contains(view, "GPU MEM") || !strings.Contains(view, "Fake GPU 0: ") {
		t.Errorf("the view in GPU mode lacks the GPU:\n%s", view)
	}
	d.stop(t)
}

// In process with the fake driver: every tensor's bytes on the "device"
// are the .safetensors bytes, for the producer's batches and for a
// consumer's own batch size (several segments); slabs come back.
func TestCUDAFilesPointAtTheBatchBytes(t *testing.T) {
	mnt, drv := mountWithFakeGPU(t, "--source", "synthetic:30", "--batch-size", "8", "--image-size", "16",
		"--epochs", "1", "--buffer", "256KiB", "--device", "GPU-anything")
	for name, size := range map[string]string{"shared": "", "own": "5"} {
		dir := filepath.Join(mnt, "consumers", name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if size != "" {
			if err := os.WriteFile(filepath.Join(dir, "batch_size"), []byte(size+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	samples := map[string]int{}
	for _, name := range []string{"shared", "own"} {
		dir := filepath.Join(mnt, "consumers", name)
		for i := uint64(0); ; i++ {
			cf, err := os.Open(filepath.Join(dir, fs.CUDAName(i)))
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			f := readCUDA(t, cf.Name()) // a second open, while cf holds the batch
			raw, err := os.ReadFile(filepath.Join(dir, fs.BatchName(i)))
			if err != nil {
				t.Fatal(err)
			}
			b, err := batchfile.ParseBatch(raw)
			if err != nil {
				t.Fatal(err)
			}
			labels := make([]byte, 8*len(b.Labels))
			for k, v := range b.Labels {
				binary.LittleEndian.PutUint64(labels[8*k:], uint64(v))
			}
			for tensor, want := range map[string][]byte{"labels": labels, "images": b.Images} {
				var got []byte
				for _, s := range f.tensor(tensor).Segments {
					part := make([]byte, s.Bytes)
					if err := drv.CopyToHost(part, cudaSlab(t, mnt, int(s.Slab))+uint64(s.Offset)); err != nil {
						t.Fatal(err)
					}
					got = append(got, part...)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s/%d: %s on the GPU differ from the batch file", name, i, tensor)
				}
			}
			if name == "own" && len(f.tensor("images").Segments) > 1 {
				samples["own, spanning slabs"]++
			}
			samples[name] += b.Samples()
			cf.Close()
		}
	}
	if samples["shared"] != 30 || samples["own"] != 30 || samples["own, spanning slabs"] == 0 {
		t.Fatalf("read %v: want 30 samples each, and some own batches across two slabs", samples)
	}
	waittest.Until(t, "every slab is given back after everything was read", func() bool {
		status, _ := os.ReadFile(filepath.Join(mnt, "status"))
		return strings.Contains(string(status), ", 0 holding a batch")
	})
}

// A consumer batch size spanning more producer batches than there are GPU
// slabs would wait forever for room: batch_size refuses it (EINVAL) even
// where the host buffer would hold them.
func TestBatchSizeMustFitTheGPUSlabs(t *testing.T) {
	t.Setenv("TSOCK_LIBCUDA", gputest.LibCUDA(t))
	slab := 8 * (16 + 3*16*16) // one batch's tensors
	d := startDaemon(t, "--source", "synthetic:40", "--batch-size", "8", "--image-size", "16",
		"--buffer", "1MiB", "--gpu-buffer", fmt.Sprint(3*slab), "--device", "cuda:0")
	dir := filepath.Join(d.dir, "consumers", "trial")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	knob := filepath.Join(dir, "batch_size")
	// 17 samples span up to 4 producer batches of 8; 3 slabs hold 3.
	if err := os.WriteFile(knob, []byte("17\n"), 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("batch size 17 over 3 slabs: %v, want EINVAL", err)
	}
	if err := os.WriteFile(knob, []byte("9\n"), 0); err != nil {
		t.Fatalf("batch size 9 over 3 slabs: %v", err)
	}
	if got := readFile(t, knob); got != "9\n" {
		t.Fatalf("batch_size %q, want 9", got)
	}
	d.stop(t)
}

// cudaSlab is slab id's device address, from the fake IPC handle in
// gpu/slabs ("fake:<hex address>") and the slab's offset.
func cudaSlab(t *testing.T, mnt string, id int) uint64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(mnt, "gpu", "slabs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if f[0] != fmt.Sprint(id) {
			continue
		}
		h, err := hex.DecodeString(f[1])
		if err != nil {
			t.Fatal(err)
		}
		var addr, offset uint64
		if _, err := fmt.Sscanf(strings.TrimRight(string(h), "\x00"), "fake:%x", &addr); err != nil {
			t.Fatalf("handle %q: %v", h, err)
		}
		if _, err := fmt.Sscan(f[4], &offset); err != nil {
			t.Fatalf("slab line %q: offset: %v", line, err)
		}
		return addr + offset
	}
	t.Fatalf("no slab %d in gpu/slabs", id)
	return 0
}

func TestDeviceWithoutADriverFailsAtStart(t *testing.T) {
	t.Setenv("TSOCK_LIBCUDA", filepath.Join(t.TempDir(), "libcuda.so.1"))
	code, out := runCLI(t, "mount", t.TempDir(), "--source", "synthetic:10", "--device", "cuda:0")
	if code != exitError || !strings.Contains(out, "--device cuda:0: no CUDA driver") {
		t.Fatalf("exit %d, %q", code, out)
	}
}

// A consumer killed while it maps a .cuda file gives its batch, and so the
// batch's GPU slab, back through the kernel's release of its files.
func TestKilledCUDAHolderGivesItsSlabBack(t *testing.T) {
	t.Setenv("TSOCK_LIBCUDA", gputest.LibCUDA(t))
	d := startDaemon(t, "--source", "synthetic:16", "--batch-size", "8", "--image-size", "16", "--epochs", "1",
		"--buffer", "1MiB", "--device", "cuda:0")
	dir := filepath.Join(d.dir, "consumers", "victim")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := startVictim(t, filepath.Join(dir, fs.CUDAName(0)))
	consumerStatus := func() string {
		s, _ := os.ReadFile(filepath.Join(dir, "status"))
		return string(s)
	}
	mountStatus := func() string {
		s, _ := os.ReadFile(filepath.Join(d.dir, "status"))
		return string(s)
	}
	if s := consumerStatus(); !strings.Contains(s, "open batches: 1") {
		t.Fatalf("the mapped .cuda file does not hold its batch:\n%s", s)
	}
	waittest.Until(t, "both batches are made", func() bool { return strings.Contains(mountStatus(), "state: idle") })
	if s := mountStatus(); !strings.Contains(s, ", 2 holding a batch") {
		t.Fatalf("two batches made, but not two slabs in use:\n%s", s)
	}
	victim.Process.Kill()
	victim.Wait()
	waittest.Until(t, "the killed holder's batch is released", func() bool {
		return strings.Contains(consumerStatus(), "batches read: 1\n")
	})
	status := mountStatus()
	if !strings.Contains(status, ", 1 holding a batch") {
		t.Fatalf("batch 0's slab not given back (batch 1 alone should hold one):\n%s", status)
	}
	d.stop(t)
}

// mountWithFakeGPU runs "tsock mount MNT args…" in process with the fake
// CUDA driver and waits for its ready line; cleanup stops and unmounts it.
func mountWithFakeGPU(t *testing.T, args ...string) (string, *gputest.Driver) {
	t.Helper()
	fusetest.Need(t)
	drv := gputest.NewDriver()
	old := openDriver
	openDriver = func(spec gpu.DeviceSpec) (gpu.Driver, error) { return drv, nil }
	mnt := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"mount", mnt}, args...), w, os.Stderr)
		w.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("mount did not stop")
		}
		syscall.Unmount(mnt, syscall.MNT_DETACH)
		openDriver = old
	})
	line := make([]byte, 256)
	if n, _ := stdout.Read(line); !bytes.HasPrefix(line[:n], []byte("tsock: mounted")) {
		t.Fatalf("not mounted: %q", line[:n])
	}
	go io.Copy(io.Discard, stdout)
	return mnt, drv
}
