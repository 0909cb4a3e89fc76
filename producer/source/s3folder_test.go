package source_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// uploadFolder puts the ImageFolder dir into bucket under prefix with
// real PUTs, and keys that are not samples beside them: a hidden class,
// a file at the top, a non-image in a class.
func uploadFolder(t *testing.T, s *s3test.Server, bucket, prefix, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		s.Put(t, bucket, prefix+filepath.ToSlash(rel), p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(t.TempDir(), "junk")
	if err := os.WriteFile(junk, []byte("not a sample"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{".hidden/x.jpg", "README.jpg", "class_00/notes.txt"} {
		s.Put(t, bucket, prefix+key, junk)
	}
}

// TestS3FolderGivesTheLocalFoldersBatches: ImageFolder-shaped keys in a
// real S3 server, read through a proxy that throttles, fails, cuts and
// resets, give the same batches as the same files on a local disk, byte
// for byte, with the same classes; what is not a sample is left out.
func TestS3FolderGivesTheLocalFoldersBatches(t *testing.T) {
	server := s3test.Start(t, "data")
	dir := producertest.Folder(t, 30, 3)
	uploadFolder(t, server, "data", "imagenet/train/", dir)
	faults := []s3test.Fault{s3test.SlowDown, s3test.Error500, s3test.Truncate, s3test.Reset}
	proxy := s3test.StartProxy(t, server, func(n int) s3test.Fault {
		if n%4 == 0 {
			return faults[(n/4)%len(faults)]
		}
		return s3test.Pass
	})
	src, folder := openBoth(t, "s3://data/imagenet/train", proxy.Endpoint, dir)
	if fmt.Sprint(src.Classes()) != fmt.Sprint(folder.Classes()) || src.Len() != folder.Len() {
		t.Fatalf("classes %v, %d samples in S3; %v, %d on disk", src.Classes(), src.Len(), folder.Classes(), folder.Len())
	}
	cfg := producertest.Config(src, 8, 2, 2)
	cfg.Fetch = 8
	producertest.EqualBatches(t, producertest.Produce(t, producertest.Config(folder, 8, 2, 2)), producertest.Produce(t, cfg), "the local folder and the same keys in S3")
	if proxy.Faults.Load() == 0 {
		t.Fatal("no fault injected")
	}
}

// TestS3FolderListsInParallelAcrossPages: classes are listed many at a
// time (a store 20 ms away holds several listings at once), a class of
// more keys than one page (1,000) is listed whole and in order, and a key
// deleted after the listing costs its sample alone.
func TestS3FolderListsInParallelAcrossPages(t *testing.T) {
	server := s3test.Start(t, "data")
	one, err := source.ScanFolder(producertest.Folder(t, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(one.Name(0))
	if err != nil {
		t.Fatal(err)
	}
	const classes, big = 24, 1500
	for c := range classes {
		n := 2
		if c == 0 {
			n = big
		}
		d := filepath.Join(server.Root, "data", "train", fmt.Sprintf("c%02d", c))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("img-%05d.jpg", i)), img, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	proxy := s3test.StartProxy(t, server, func(int) s3test.Fault { return s3test.Pass })
	proxy.Delay.Store(int64(20 * time.Millisecond))
	defer source.SetListProgressEvery(5 * time.Millisecond)()
	var logged syncBuffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	src, err := source.Open(context.Background(), "s3://data/train/", source.Options{S3: s3Config(proxy.Endpoint)})
	if err != nil {
		t.Fatal(err)
	}
	// The user waiting at the terminal sees how far the listing got.
	if log := logged.String(); !regexp.MustCompile(`msg=listing source=s3://data/train/ keys=\d+ classes_done=\d+ classes=24\n`).MatchString(log) ||
		!strings.Contains(log, "msg=listed source=s3://data/train/ keys=1546 classes=24") {
		t.Fatalf("the listing's log:\n%s", log)
	}
	if src.Len() != big+2*(classes-1) || len(src.Classes()) != classes {
		t.Fatalf("%d samples in %d classes", src.Len(), len(src.Classes()))
	}
	names := make([]string, src.Len())
	for i := range names {
		names[i] = src.Name(i)
	}
	if !sort.StringsAreSorted(names) || names[big-1] != "s3://data/train/c00/img-01499.jpg" || src.Label(big) != 1 {
		t.Fatalf("order: %q … %q, label %d", names[0], names[big-1], src.Label(big))
	}
	if got := proxy.MaxInFlight.Load(); got < 4 {
		t.Fatalf("at most %d listings in flight: the classes were listed one by one", got)
	}
	proxy.Delay.Store(0)
	if err := os.Remove(filepath.Join(server.Root, "data", "train", "c05", "img-00001.jpg")); err != nil {
		t.Fatal(err)
	}
	made := 0
	for _, b := range producertest.Produce(t, producertest.Config(src, 64, 1, 2)) {
		made += len(b.Indices)
	}
	if made != src.Len()-1 {
		t.Fatalf("%d of %d samples made with one key deleted", made, src.Len())
	}
}

// syncBuffer is a bytes.Buffer that goroutines may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestS3FolderWithoutClassesFails: a prefix with no CLASS/ sub-prefix
// holding images fails at open, naming the prefix and what it wants.
func TestS3FolderWithoutClassesFails(t *testing.T) {
	server := s3test.Start(t, "data")
	flat := filepath.Join(server.Root, "data", "flat")
	if err := os.MkdirAll(flat, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(flat, "a.jpg"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for spec, want := range map[string]string{
		"s3://data/flat/":    "s3://data/flat/: no image keys",
		"s3://data/nothing/": "s3://data/nothing/: no image keys",
		"s3://Bad_Bucket/x/": "bucket \"Bad_Bucket\"",
	} {
		if _, err := source.Open(context.Background(), spec, source.Options{S3: s3Config(server.Endpoint)}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", spec, err, want)
		}
	}
}
