package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs"
)

// sampleBatch is a batch of the given dataset indices: x holds each
// index as 4 float32 bytes, tok is ragged (index%3 int16 values, each
// the index), indices are the indices.
func sampleBatch(t *testing.T, meta map[string]string, idx ...int64) []byte {
	t.Helper()
	var x, tok []byte
	off := []int64{0}
	for _, i := range idx {
		x = binary.LittleEndian.AppendUint32(x, uint32(i))
		for k := int64(0); k < i%3; k++ {
			tok = binary.LittleEndian.AppendUint16(tok, uint16(i))
		}
		off = append(off, off[len(off)-1]+i%3)
	}
	data, err := batchfile.Build(meta, []batchfile.TensorData{
		{Name: "x", Dtype: "F32", Shape: []int64{int64(len(idx))}, Data: x},
		{Name: "tok", Dtype: "I16", Shape: []int64{off[len(off)-1]}, Data: tok},
		{Name: "tok.offsets", Dtype: "I64", Shape: []int64{int64(len(off))}, Data: batchfile.Int64s(off...)},
		{Name: "indices", Dtype: "I64", Shape: []int64{int64(len(idx))}, Data: batchfile.Int64s(idx...)},
	}, batchfile.PageSize) // room for tsock's metadata: published as written
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// publish writes data as ingest batch seq, returning the close's error.
func publish(d *mountProc, seq uint64, data []byte) error {
	return os.WriteFile(filepath.Join(d.dir, "ingest", fs.BatchName(seq)), data, 0o644)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readSamples reads a consumer's batch and checks every sample's bytes
// against its index; it returns the indices.
func readSamples(t *testing.T, path string) ([]int64, map[string]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	h, err := batchfile.ParseBytes(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	get := func(name string) []byte {
		tn := h.Tensor(name)
		return data[h.DataStart+tn.Begin : h.DataStart+tn.End]
	}
	x, tok, idx, off := get("x"), get("tok"), get("indices"), h.Ragged["tok"]
	var out []int64
	for i := 0; i < h.Samples; i++ {
		v := int64(binary.LittleEndian.Uint64(idx[8*i:]))
		if int64(binary.LittleEndian.Uint32(x[4*i:])) != v || off[i+1]-off[i] != v%3 {
			t.Fatalf("%s: sample %d (index %d): x %d, %d tokens", path, i, v, binary.LittleEndian.Uint32(x[4*i:]), off[i+1]-off[i])
		}
		for k := off[i]; k < off[i+1]; k++ {
			if int64(binary.LittleEndian.Uint16(tok[2*k:])) != v {
				t.Fatalf("%s: token %d of sample %d is not %d", path, k, i, v)
			}
		}
		out = append(out, v)
	}
	return out, h.Meta
}

// TestIngestRefusesBadBatches: every malformed batch fails the writer's
// close (or create) with an errno, publishes nothing, says why in
// ingest/status, and the same number can then be written.
func TestIngestRefusesBadBatches(t *testing.T) {
	d := startDaemon(t, "--ingest", "--batch-size", "4", "--buffer", "64KiB")
	good := sampleBatch(t, map[string]string{"epoch": "0"}, 0, 1, 2, 3)
	if err := publish(d, 0, good); err != nil {
		t.Fatalf("good batch: %v", err)
	}
	hdr := binary.LittleEndian.Uint64(sampleBatch(t, nil, 4, 5))
	withHeader := func(js string) []byte {
		b := sampleBatch(t, nil, 4, 5)
		return append(append(binary.LittleEndian.AppendUint64(nil, uint64(len(js))), js...), b[8+hdr:]...)
	}
	js := string(sampleBatch(t, nil, 4, 5)[8 : 8+hdr])
	cases := []struct {
		name  string
		seq   uint64
		data  []byte
		errno syscall.Errno
		says  string
	}{
		{"not safetensors", 1, []byte("hello, world, not a batch"), syscall.EINVAL, "header length"},
		{"bytes outside the file", 1, sampleBatch(t, nil, 4, 5)[:len(sampleBatch(t, nil, 4, 5))-3], syscall.EINVAL, "bytes of data"},
		{"leading dims disagree", 1, withHeader(strings.Replace(js, `"x":{"dtype":"F32","shape":[2]`, `"x":{"dtype":"F32","shape":[1]`, 1)), syscall.EINVAL, "bytes of data"},
		{"bad offsets", 1, withHeader(strings.Replace(js, `"tok.offsets":{"dtype":"I64"`, `"tok.offsets":{"dtype":"I32"`, 1)), syscall.EINVAL, "tok.offsets"},
		{"other tensors", 1, mustBuild(t, []batchfile.TensorData{{Name: "y", Dtype: "U8", Shape: []int64{1}, Data: []byte{1}}}), syscall.EINVAL, "tensors"},
		{"reused number", 0, good, syscall.EEXIST, ""},
		{"number ahead", 7, good, syscall.EINVAL, ""},
		{"larger than --buffer", 1, mustBuild(t, []batchfile.TensorData{{Name: "x", Dtype: "U8", Shape: []int64{1, 70 << 10}, Data: make([]byte, 70<<10)}}), syscall.EFBIG, "buffer"},
	}
	if r := readFile(t, filepath.Join(d.dir, "ingest", "refusal")); r != "" {
		t.Fatalf("ingest/refusal before any refusal: %q", r)
	}
	for _, c := range cases {
		err := publish(d, c.seq, c.data)
		var errno syscall.Errno
		if !errors.As(err, &errno) || errno != c.errno {
			t.Errorf("%s: got %v, want %v", c.name, err, c.errno)
		}
		if next := readFile(t, filepath.Join(d.dir, "ingest", "next")); next != "1\n" {
			t.Fatalf("%s: next is %q after a refusal", c.name, next)
		}
		if st := readFile(t, filepath.Join(d.dir, "ingest", "status")); c.says != "" && !strings.Contains(st, "last refusal: 000001: ") || !strings.Contains(st, c.says) {
			t.Errorf("%s: ingest/status does not say %q:\n%s", c.name, c.says, st)
		}
		// ingest/refusal says the same in one line, for programs.
		if r := readFile(t, filepath.Join(d.dir, "ingest", "refusal")); c.says != "" && (!strings.HasPrefix(r, "000001: ") ||
			!strings.Contains(r, c.says) || strings.Count(r, "\n") != 1 || !strings.HasSuffix(r, "\n")) {
			t.Errorf("%s: ingest/refusal is %q, want one line of batch 000001 saying %q", c.name, r, c.says)
		}
	}
	// The end of the producer's epoch: a consumer's last batch may be short.
	if err := publish(d, 1, sampleBatch(t, map[string]string{"last": "true"}, 4, 5)); err != nil {
		t.Fatalf("batch 1 after the refusals: %v", err)
	}
	if err := os.Mkdir(filepath.Join(d.dir, "consumers", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]int64{{0, 1, 2, 3}, {4, 5}} {
		got, _ := readSamples(t, filepath.Join(d.dir, "consumers", "c", fs.BatchName(uint64(i))))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("batch %d holds %v, want %v", i, got, want)
		}
	}
	d.stop(t)
}

func mustBuild(t *testing.T, tensors []batchfile.TensorData) []byte {
	t.Helper()
	b, err := batchfile.Build(nil, tensors, 8)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIngestBackpressureAndAKilledWriter: a create waits while the
// buffer is full; a writer killed mid-batch publishes nothing, and a
// restarted one continues from ingest/next.
func TestIngestBackpressureAndAKilledWriter(t *testing.T) {
	one := int64(len(sampleBatch(t, nil, 0, 1, 2, 3)))
	d := startDaemon(t, "--ingest", "--batch-size", "4", "--buffer", fmt.Sprint(2*one+one/2))
	for seq := uint64(0); seq < 2; seq++ {
		if err := publish(d, seq, sampleBatch(t, nil, int64(4*seq), int64(4*seq+1), int64(4*seq+2), int64(4*seq+3))); err != nil {
			t.Fatal(err)
		}
	}
	third := make(chan error, 1)
	go func() { third <- publish(d, 2, sampleBatch(t, nil, 8, 9, 10, 11)) }()
	waittest.Until(t, "the third create waits for room", func() bool {
		return strings.Contains(readFile(t, filepath.Join(d.dir, "status")), "state: buffer full")
	})
	// Not ingest/status: a create that waits holds ingest/'s directory
	// lock, and a lookup there can wait behind it (see the README).
	select {
	case err := <-third:
		t.Fatalf("the third batch was written into a full buffer: %v", err)
	default:
	}
	if err := os.Mkdir(filepath.Join(d.dir, "consumers", "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, _ := readSamples(t, filepath.Join(d.dir, "consumers", "c", fs.BatchName(0)))
	if err := <-third; err != nil {
		t.Fatalf("third batch after room was made: %v (read %v)", err, got)
	}
	// Room for one more, then a writer killed half-way through batch 3.
	second, _ := readSamples(t, filepath.Join(d.dir, "consumers", "c", fs.BatchName(1)))
	got = append(got, second...)
	full := sampleBatch(t, nil, 12, 13, 14, 15)
	src := filepath.Join(t.TempDir(), "batch")
	if err := os.WriteFile(src, full[:len(full)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	victim := exec.Command("sh", "-c", `exec 3>"$1"; cat "$2" >&3; echo written; exec sleep 60`, "sh",
		filepath.Join(d.dir, "ingest", fs.BatchName(3)), src)
	out, _ := victim.StdoutPipe()
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 8)
	io.ReadFull(out, line)
	victim.Process.Kill()
	victim.Wait()
	waittest.Until(t, "the killed writer's batch is refused", func() bool {
		return strings.Contains(readFile(t, filepath.Join(d.dir, "ingest", "status")), "refused: 1")
	})
	if next := readFile(t, filepath.Join(d.dir, "ingest", "next")); next != "3\n" {
		t.Fatalf("next is %q after a killed writer, want 3", next)
	}
	if err := publish(d, 3, full); err != nil {
		t.Fatalf("restarted writer: %v", err)
	}
	var all []int64
	all = append(all, got...)
	for i := uint64(2); i < 4; i++ {
		s, _ := readSamples(t, filepath.Join(d.dir, "consumers", "c", fs.BatchName(i)))
		all = append(all, s...)
	}
	if fmt.Sprint(all) != fmt.Sprint([]int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}) {
		t.Fatalf("consumer read %v", all)
	}
	d.stop(t)
}

// TestIngestOrderedLateJoinersGetExactEpochs: in ordered mode a Go
// producer follows ingest/order (skipping sample 7 always) while
// consumers with their own batch sizes join at random moments; each of
// their epochs holds every other sample exactly once, ragged tensors
// cut right. TSOCK_TEST_SEED replays a schedule.
func TestIngestOrderedLateJoinersGetExactEpochs(t *testing.T) {
	t.Parallel() // see parallelTests
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TSOCK_TEST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("TSOCK_TEST_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	const n, epochs = 30, 2
	one := int64(len(sampleBatch(t, nil, 0, 1, 2, 3)))
	d := startDaemon(t, "--ingest", "--samples", fmt.Sprint(n), "--batch-size", "4", "--epochs", fmt.Sprint(epochs),
		"--buffer", fmt.Sprint(4*one), "--seed", fmt.Sprint(seed))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the producer
		defer wg.Done()
		for ctx.Err() == nil {
			data, err := os.ReadFile(filepath.Join(d.dir, "ingest", "order"))
			if err != nil {
				return // unmounted
			}
			f := strings.Fields(string(data))
			var idx []int64
			for _, s := range f[4:] {
				v, _ := strconv.ParseInt(s, 10, 64)
				if v != 7 {
					idx = append(idx, v)
				}
			}
			for len(idx) > 0 {
				k := min(4, len(idx))
				seq, _ := strconv.ParseUint(strings.TrimSpace(readFile(t, filepath.Join(d.dir, "ingest", "next"))), 10, 64)
				if err := publish(d, seq, sampleBatch(t, nil, idx[:k]...)); err != nil {
					t.Errorf("publish %v: %v", idx[:k], err)
					return
				}
				idx = idx[k:]
			}
			if f[4+len(f[4:])-1] == "7" { // a trailing skip
				os.WriteFile(filepath.Join(d.dir, "ingest", "skip"), []byte("7\n"), 0o644)
			}
		}
	}()
	consumers := 6
	errs := make(chan error, consumers)
	for c := 0; c < consumers; c++ {
		name := fmt.Sprintf("c%d", c)
		size := 1 + rng.IntN(6)
		if err := os.Mkdir(filepath.Join(d.dir, "consumers", name), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d.dir, "consumers", name, "batch_size"), []byte(fmt.Sprintln(size)), 0o644)
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := map[string]map[int64]int{}
			for i := uint64(0); ; i++ {
				path := filepath.Join(d.dir, "consumers", name, fs.BatchName(i))
				if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
					break
				}
				idx, meta := readSamples(t, path)
				if seen[meta["epoch"]] == nil {
					seen[meta["epoch"]] = map[int64]int{}
				}
				for _, v := range idx {
					seen[meta["epoch"]][v]++
				}
			}
			if len(seen) != epochs {
				errs <- fmt.Errorf("%s (batch size %d) read %d epochs, want %d", name, size, len(seen), epochs)
				return
			}
			for e, s := range seen {
				if len(s) != n-1 || s[7] != 0 {
					errs <- fmt.Errorf("%s epoch %s: %d distinct samples (sample 7: %d), want %d", name, e, len(s), s[7], n-1)
					return
				}
				for v, k := range s {
					if k != 1 {
						errs <- fmt.Errorf("%s epoch %s: sample %d read %d times", name, e, v, k)
						return
					}
				}
			}
			errs <- nil
		}()
		// The next joins after a random number of batches published.
		target := strconv.Itoa(rng.IntN(12))
		waittest.Until(t, "batches published", func() bool {
			next, _ := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(d.dir, "ingest", "next"))))
			want, _ := strconv.Atoi(target)
			return next >= want || next > 0 && c > 0
		})
	}
	for c := 0; c < consumers; c++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	st := readFile(t, filepath.Join(d.dir, "ingest", "status"))
	if !strings.Contains(st, "skipped samples: 1") {
		t.Errorf("ingest/status does not count the skipped sample:\n%s", st)
	}
	var doc statusDoc
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(d.dir, "status.json"))), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Mode != "ingest" || doc.Producer.Unit != "samples" || doc.Producer.EpochLen != n || doc.Skipped != 1 || len(doc.Consumers) != consumers {
		t.Errorf("status.json of an ordered ingest mount: %+v", doc)
	}
	for _, c := range doc.Consumers {
		if c.State != "done" || c.SamplesRead != epochs*(n-1) {
			t.Errorf("status.json: consumer %+v, want done after %d samples", c, epochs*(n-1))
		}
	}
	cancel()
	d.stop(t)
	wg.Wait()
}
