package producertest

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/tsock/tsock/producer/source"
	"golang.org/x/sys/unix"
)

// OpenFolder opens dir, an ImageFolder, as the mount would (source.Open)
// and returns the folder source itself, for the tests that ask what only
// a folder answers (its rescan, its files' names).
func OpenFolder(t testing.TB, dir string) *source.Folder {
	t.Helper()
	src, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, ok := src.(*source.Folder)
	if !ok {
		t.Fatalf("source %s opened as %T, not a folder", dir, src)
	}
	return f
}

// Folder writes n small JPEGs in classes classes under a new temp dir.
func Folder(t testing.TB, n, classes int) string {
	t.Helper()
	dir := t.TempDir()
	if err := source.WriteFolder(dir, source.GenOptions{Images: n, Classes: classes, MinSide: 40, MaxSide: 90, Quality: 85}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// BadFiles adds inputs that must be skipped to class directory class of
// dir, and one tiny image that must not be: it returns the names of the
// bad ones and of the tiny one. The names sort after every good file.
func BadFiles(t testing.TB, dir, class string) (bad []string, tiny string) {
	t.Helper()
	d := filepath.Join(dir, class)
	good, err := os.ReadFile(filepath.Join(d, firstFile(t, d)))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad = append(bad,
		write("zz-empty.jpg", nil),
		write("zz-truncated.jpg", good[:len(good)/2]),
		write("zz-text.jpg", []byte("this is not an image\n")),
		write("zz-huge-header.png", hugePNGHeader()),
	)
	dangling := filepath.Join(d, "zz-dangling.jpg")
	if err := os.Symlink(filepath.Join(d, "does-not-exist"), dangling); err != nil {
		t.Fatal(err)
	}
	bad = append(bad, dangling)
	// Hostile entries a root daemon must not be stalled or fooled by: a
	// FIFO (its open would wait for a writer forever), a device, a
	// symlink loop, a sparse file, a file it may read but no user should.
	fifo := filepath.Join(d, "zz-fifo.jpg")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	loop := filepath.Join(d, "zz-loop.jpg")
	for _, l := range [][2]string{{"/dev/zero", "zz-device.jpg"}, {loop, "zz-loop.jpg"}, {"/etc/shadow", "zz-shadow.jpg"}} {
		if err := os.Symlink(l[0], filepath.Join(d, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	sparse := write("zz-sparse.jpg", nil)
	if err := os.Truncate(sparse, 1<<20); err != nil {
		t.Fatal(err)
	}
	bad = append(bad, fifo, filepath.Join(d, "zz-device.jpg"), loop, filepath.Join(d, "zz-shadow.jpg"), sparse)
	var buf bytes.Buffer
	png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1, 1)))
	tiny = write("zz-tiny.png", buf.Bytes())
	return bad, tiny
}

func firstFile(t testing.TB, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("read %s: %v", dir, err)
	}
	return entries[0].Name()
}

// hugePNGHeader claims 100000×100000 pixels: it must be refused from the
// header, before any allocation.
func hugePNGHeader() []byte {
	var buf bytes.Buffer
	png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1, 1)))
	b := buf.Bytes()
	// IHDR: length at 8, type at 12, width and height at 16..23, CRC of
	// type and data at 29.
	for _, off := range []int{16, 20} {
		binary.BigEndian.PutUint32(b[off:], 100000)
	}
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}

// ShardFiles counts the shards next to a local shard spec (as Shards
// returns), and their bytes.
func ShardFiles(tb testing.TB, spec string) (n int, bytes int64) {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(spec), "*.tar"))
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			tb.Fatal(err)
		}
		bytes += st.Size()
	}
	return len(files), bytes
}

// Shards writes the samples of ImageFolder dir, in its order, as
// WebDataset tar shards of perShard samples each (KEY.jpg and KEY.cls,
// KEY the sample's index) in a new temp dir, and returns a brace spec
// naming them all.
func Shards(t testing.TB, dir string, perShard int) string {
	t.Helper()
	src, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	n := (src.Len() + perShard - 1) / perShard
	for s := range n {
		f, err := os.Create(filepath.Join(out, fmt.Sprintf("shard-%03d.tar", s)))
		if err != nil {
			t.Fatal(err)
		}
		w := tar.NewWriter(f)
		for i := s * perShard; i < min((s+1)*perShard, src.Len()); i++ {
			img, err := os.ReadFile(src.Name(i))
			if err != nil {
				t.Fatal(err)
			}
			cls := []byte(fmt.Sprintf("%d\n", src.Label(i)))
			for _, m := range []struct {
				ext  string
				data []byte
			}{{filepath.Ext(src.Name(i)), img}, {".cls", cls}} {
				if err := w.WriteHeader(&tar.Header{Name: fmt.Sprintf("%06d%s", i, m.ext), Mode: 0o644, Size: int64(len(m.data))}); err != nil {
					t.Fatal(err)
				}
				if _, err := w.Write(m.data); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf("%s/shard-{000..%03d}.tar", out, n-1)
}

// DiskDir is a new directory on a local disk, removed at the test's end:
// under /var/tmp, the shard disk's default (t.TempDir's /tmp may be a
// tmpfs, which the shard disk refuses).
func DiskDir(t testing.TB) string {
	dir, err := os.MkdirTemp("/var/tmp", "tsock-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// OpenShards opens tar shards on a local disk as source.Open does, with
// the default shard memory and no cache.
func OpenShards(tb testing.TB, spec string) *source.Shards {
	tb.Helper()
	src, err := source.Open(context.Background(), spec, source.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	sh, ok := src.(*source.Shards)
	if !ok {
		tb.Fatalf("%s opened as %T, not shards", spec, src)
	}
	return sh
}

// Cache puts a cache of size bytes in front of src: in memory, or in an
// unnamed file in dir; closed when the test ends.
func Cache(tb testing.TB, src source.Source, size int64, dir string) *source.Cache {
	tb.Helper()
	c, err := source.NewCache(src, source.CacheConfig{Size: size, Dir: dir})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}
