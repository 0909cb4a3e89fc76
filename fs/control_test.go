package fs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/waittest"
	"github.com/tsock/tsock/fs"
)

func TestBatchSizeControlFile(t *testing.T) {
	both(t, func(t *testing.T, e *env) {
		e.join("a")
		knob := e.path("consumers", "a", "batch_size")
		read := func() string {
			b, err := os.ReadFile(knob)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		if got := read(); got != "1\n" {
			t.Fatalf("default batch_size %q, want the producer's 1", got)
		}
		if st, err := os.Stat(knob); err != nil || st.Mode().Perm() != 0o644 {
			t.Fatalf("batch_size mode %v (%v), want 0644", st.Mode(), err)
		}
		write := func(v string) error { return os.WriteFile(knob, []byte(v), 0o644) }
		if err := write("3\n"); err != nil {
			t.Fatalf("echo 3 > batch_size: %v", err)
		}
		for _, bad := range []string{"0\n", "-2", "abc", "1.5", " ", "99999999999", "9223372036854775807", "4611686018427387904\n", "9223372036854775808", "-9223372036854775808"} {
			if err := write(bad); !errors.Is(err, syscall.EINVAL) {
				t.Errorf("write %q: got %v, want EINVAL", bad, err)
			}
		}
		if got := read(); got != "3\n" {
			t.Fatalf("batch_size after bad writes %q, want 3", got)
		}
		for i := 0; i < 7; i++ {
			e.publish(i)
		}
		got, err := os.ReadFile(e.batch("a", 0))
		if err != nil {
			t.Fatal(err)
		}
		want := bytes.Join([][]byte{content(0), content(1), content(2)}, nil)
		if !bytes.Equal(got, want) {
			t.Fatalf("re-batched batch 0: %d bytes, not batches 0-2 (%d bytes)", len(got), len(want))
		}
		if err := write("2"); !errors.Is(err, syscall.EBUSY) {
			t.Fatalf("batch_size after reading: got %v, want EBUSY", err)
		}
		waittest.Until(t, "release", func() bool { cs, _ := e.store.ConsumerSnapshot("a"); return cs.BatchesRead == 1 })
		entries, _ := os.ReadDir(e.path("consumers", "a"))
		var names []string
		for _, de := range entries {
			names = append(names, de.Name())
		}
		if strings.Join(names, " ") != "000001.safetensors batch_size drop_last read_ahead state status subset world" {
			t.Fatalf("ls: %v (the 7th sample waits for a full batch)", names)
		}
		if snap := e.store.Snapshot(); snap.Freed != 3 {
			t.Fatalf("after reading 3 samples: %d producer batches freed, want 3", snap.Freed)
		}
	})
}

// TestASubsetListArrivesInAnyOrder: a list's pieces may reach the daemon
// in any order (a program writing one list from several threads, with
// pwrite): the list is the bytes at their offsets, whatever order they
// came in. A hole left at the close, or a piece written twice, is refused
// (EINVAL), and the subset stays what it was. A list refused for its size
// stays refused for the writes after (a writer told of a short write
// writes the rest at the next offset), never EINVAL. Only the node layer can send pieces in a chosen
// order (nodeTree).
func TestASubsetListArrivesInAnyOrder(t *testing.T) {
	e := nodeEnv(t, func(o *fs.Options) {
		o.ParseSubset = func(text []byte) (*batchstore.Subset, error) {
			return batchstore.ParseSubset(text, batchstore.Dataset{Len: 1000})
		}
		o.SubsetBytes = func() int64 { return 2000 }
	})
	tr := e.tr.(*nodeTree)
	if err := tr.Mkdir("consumers/a"); err != nil {
		t.Fatal(err)
	}
	var list []byte
	for i := range 300 {
		list = fmt.Appendf(list, "%d\n", i*3)
	}
	third := len(list) / 3
	in := func(order ...int) []piece {
		var ps []piece
		for _, k := range order {
			ps = append(ps, piece{int64(k * third), list[k*third : min((k+1)*third, len(list))]})
			if k == 2 {
				ps[len(ps)-1].data = list[2*third:]
			}
		}
		return ps
	}
	writes, closed := tr.WritePieces("consumers/a/subset", in(2, 0, 1))
	for k, err := range writes {
		if err != nil {
			t.Fatalf("piece %d of a list sent last first: %v", k, err)
		}
	}
	if closed != nil {
		t.Fatalf("close of a list sent last first: %v", closed)
	}
	if got, err := tr.ReadFile("consumers/a/subset"); err != nil || string(got) != "list of 300\n" {
		t.Fatalf("subset after a list sent out of order: %q (%v), want a list of 300", got, err)
	}
	// A hole: pieces 0 and 2 only; piece 0 twice.
	if _, closed := tr.WritePieces("consumers/a/subset", in(2, 0)); !errors.Is(closed, syscall.EINVAL) {
		t.Fatalf("a list with a hole: close %v, want EINVAL", closed)
	}
	if writes, _ := tr.WritePieces("consumers/a/subset", in(1, 1)); !errors.Is(writes[1], syscall.EINVAL) {
		t.Fatalf("a piece written twice: %v, want EINVAL", writes[1])
	}
	big := bytes.Repeat([]byte("7\n"), 600) // 1200 bytes a piece: the second passes the 2000 allowed
	writes, _ = tr.WritePieces("consumers/a/subset", []piece{{0, big}, {1200, big}, {1200, big[:100]}, {1300, big}})
	for k, want := range []error{nil, syscall.EFBIG, syscall.EFBIG, syscall.EFBIG} {
		if !errors.Is(writes[k], want) && !(want == nil && writes[k] == nil) {
			t.Fatalf("a list past its bound, write %d: %v, want %v", k, writes[k], want)
		}
	}
	if got, _ := tr.ReadFile("consumers/a/subset"); string(got) != "list of 300\n" {
		t.Fatalf("refused lists changed the subset: %q", got)
	}
}

// TestAChildsCloseDoesNotApplyAList: a list is applied by its writer's
// last close only. A child that inherited the descriptor (a subprocess,
// a DataLoader worker) closes its copy mid-list: the kernel sends a FLUSH
// for that close too, which used to apply the part written so far (here
// refused: index 1 twice) and drop it, failing the writer's next write
// with EINVAL.
func TestAChildsCloseDoesNotApplyAList(t *testing.T) {
	e := mount(t, false, func(o *fs.Options) {
		o.ParseSubset = func(text []byte) (*batchstore.Subset, error) {
			return batchstore.ParseSubset(text, batchstore.Dataset{Len: 1000})
		}
	})
	e.join("a")
	f, err := os.OpenFile(e.path("consumers", "a", "subset"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("1\n2\n"); err != nil {
		t.Fatal(err)
	}
	child := exec.Command("/bin/true")
	child.ExtraFiles = []*os.File{f} // its copy, closed as it exits
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("2\n3\n"); err != nil { // "1 2 2 3": refused if applied in part (1 2), twice over (2)
		t.Fatalf("the writer's write after a child closed its copy: %v", err)
	}
	if got, err := os.ReadFile(e.path("consumers", "a", "subset")); err != nil || string(got) != "all\n" {
		t.Fatalf("a child's close applied part of the list: the subset reads %q (%v)", got, err)
	}
	if err := f.Close(); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("the writer's close of a list with index 2 twice: %v, want EINVAL", err)
	}
}
