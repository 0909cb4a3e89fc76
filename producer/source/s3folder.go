package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tsock/tsock/producer/source/remote"
)

// S3Folder is an ImageFolder in a bucket: keys PREFIX/CLASS/…/NAME.EXT,
// classes sorted by name get labels 0..C-1, keys sorted within a class
// (the store lists them in that order); a sample's index is its position
// in that order, as for the same files on a local disk. Each image is
// one GET. Per sample it keeps its name under its class, its label and
// an offset: about 12 bytes beside the name.
type S3Folder struct {
	store   *remote.Store
	bucket  string
	prefix  string // "" or ending in "/"
	classes []string
	names   []byte  // every sample's key after PREFIX/CLASS/, one after the other
	ends    []int64 // sample i's is names[ends[i-1]:ends[i]]
	labels  []int32
}

// s3ListParallel is how many class prefixes are listed at once: the
// store answers a page of 1,000 keys per round trip, so one prefix at a
// time would take minutes over a million keys.
const s3ListParallel = 32

// listProgressEvery is how often a long listing says how far it got.
var listProgressEvery = 2 * time.Second

// openS3Folder lists s3://BUCKET/PREFIX/ as an ImageFolder: the classes
// first (one listing with a delimiter), then every class's keys, many
// classes at once, page by page, saying how far it got every few seconds
// on the log. ctx bounds the listing; each read takes its own.
func openS3Folder(ctx context.Context, bucket, prefix string, store *remote.Store, opts Options) (*S3Folder, error) {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	f := &S3Folder{store: store, bucket: bucket, prefix: prefix}
	spec := "s3://" + bucket + "/" + prefix
	dirs, err := store.Prefixes(ctx, bucket, prefix)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", spec, err)
	}
	var classDirs []string
	for _, d := range dirs {
		if class := strings.TrimSuffix(strings.TrimPrefix(d, prefix), "/"); validClass(class) {
			classDirs = append(classDirs, d)
		}
	}
	lists, err := f.listClasses(ctx, spec, classDirs, opts)
	if err != nil {
		return nil, err
	}
	for k, names := range lists {
		if len(names.ends) == 0 {
			continue // torchvision skips empty classes too
		}
		label := int32(len(f.classes))
		f.classes = append(f.classes, strings.TrimSuffix(strings.TrimPrefix(classDirs[k], prefix), "/"))
		base := int64(len(f.names))
		f.names = append(f.names, names.names...)
		for _, e := range names.ends {
			f.ends = append(f.ends, base+e)
			f.labels = append(f.labels, label)
		}
	}
	if len(f.ends) == 0 {
		return nil, fmt.Errorf("source %s: no image keys (%s) under CLASS/ prefixes (%d prefixes)", spec, extList(), len(classDirs))
	}
	return f, nil
}

// validClass says whether a first-level prefix is a class: not hidden,
// as a local ImageFolder's, and a name a path can hold.
func validClass(class string) bool {
	return class != "" && !strings.HasPrefix(class, ".") && !strings.ContainsRune(class, 0)
}

// classNames is one class's keys after its prefix, as S3Folder keeps them.
type classNames struct {
	names []byte
	ends  []int64
}

// listClasses lists every class prefix, s3ListParallel at a time.
func (f *S3Folder) listClasses(ctx context.Context, spec string, dirs []string, opts Options) ([]classNames, error) {
	lists := make([]classNames, len(dirs))
	errs := make([]error, len(dirs))
	var listed atomic.Int64
	var classesDone atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { f.reportProgress(spec, len(dirs), &listed, &classesDone, stop, opts) })
	next := make(chan int)
	var workers sync.WaitGroup
	for range min(s3ListParallel, len(dirs)) {
		workers.Go(func() {
			for k := range next {
				lists[k], errs[k] = f.listClass(ctx, dirs[k], &listed)
				classesDone.Add(1)
			}
		})
	}
	for k := range dirs {
		next <- k
	}
	close(next)
	workers.Wait()
	close(stop)
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("source %s: class %s: %w", spec, dirs[k], err)
		}
	}
	return lists, nil
}

// listClass lists the image keys under dir.
func (f *S3Folder) listClass(ctx context.Context, dir string, listed *atomic.Int64) (classNames, error) {
	var c classNames
	reset := func() { c.names, c.ends = c.names[:0], c.ends[:0] }
	err := f.store.Walk(ctx, f.bucket, dir, listed, reset, func(key string, size int64) {
		name, ok := imageName(dir, key, size)
		if !ok {
			return
		}
		c.names = append(c.names, name...)
		c.ends = append(c.ends, int64(len(c.names)))
	})
	return c, err
}

// imageName is key's name under its class prefix dir, if it is an image
// a sample can be made of: an image extension, not empty, at most
// maxFileSize bytes (a larger one is left out at listing, as no read
// could take it).
func imageName(dir, key string, size int64) (string, bool) {
	name, ok := strings.CutPrefix(key, dir)
	if !ok || name == "" || strings.HasSuffix(name, "/") || size <= 0 || size > maxFileSize {
		return "", false
	}
	return name, imageExts[strings.ToLower(path.Ext(name))]
}

// reportProgress logs the listing's progress every listProgressEvery
// until stop: the user is waiting at the terminal.
func (f *S3Folder) reportProgress(spec string, classes int, listed, done *atomic.Int64, stop <-chan struct{}, opts Options) {
	t := time.NewTicker(listProgressEvery)
	defer t.Stop()
	start := time.Now()
	opts.tell("listing %s: %d classes", spec, classes)
	for {
		select {
		case <-stop:
			if el := time.Since(start); el >= listProgressEvery {
				slog.Info("listed", "source", spec, "keys", listed.Load(), "classes", classes, "took", el.Round(time.Millisecond))
			}
			return
		case <-t.C:
			slog.Info("listing", "source", spec, "keys", listed.Load(), "classes_done", done.Load(), "classes", classes)
			opts.tell("listing %s: %d keys, %d of %d classes done", spec, listed.Load(), done.Load(), classes)
		}
	}
}

// Describe implements Source.
func (f *S3Folder) Describe() string {
	return fmt.Sprintf("s3://%s/%s (%s)", f.bucket, f.prefix, f.store.Endpoint())
}

// Len implements Source.
func (f *S3Folder) Len() int { return len(f.ends) }

// Classes implements Source.
func (f *S3Folder) Classes() []string { return f.classes }

// Label implements Source.
func (f *S3Folder) Label(i int) int { return int(f.labels[i]) }

// key is sample i's key in the bucket.
func (f *S3Folder) key(i int) string {
	from := int64(0)
	if i > 0 {
		from = f.ends[i-1]
	}
	return f.prefix + f.classes[f.labels[i]] + "/" + string(f.names[from:f.ends[i]])
}

// Name implements Source.
func (f *S3Folder) Name(i int) string { return "s3://" + f.bucket + "/" + f.key(i) }

// Encoded implements Source: one GET of the whole object. A key
// deleted since the listing fails this sample alone.
func (f *S3Folder) Encoded(ctx context.Context, i int, scratch *[]byte) ([]byte, error) {
	data, err := f.store.Get(ctx, f.bucket, f.key(i), scratch, maxFileSize)
	if errors.Is(err, remote.ErrNotFound) {
		// One key deleted is its sample's loss; every key gone is the
		// dataset's, and fails the run.
		if gone := f.store.Vanished(ctx, f.bucket, f.prefix); gone != nil {
			return nil, gone
		}
	}
	return data, err
}

// Left implements Vanisher: the sample keys a listing of the prefix
// shows now, of the samples listed at open.
func (f *S3Folder) Left(ctx context.Context) (left, of int, err error) {
	var listed atomic.Int64
	err = f.store.Walk(ctx, f.bucket, f.prefix, &listed, func() { left = 0 }, func(key string, size int64) {
		class, _, ok := strings.Cut(strings.TrimPrefix(key, f.prefix), "/")
		if _, image := imageName(f.prefix+class+"/", key, size); ok && validClass(class) && image {
			left++
		}
	})
	return left, f.Len(), err
}

// Store is the object store the images are in.
func (f *S3Folder) Store() *remote.Store { return f.store }

// Remote says where the images are and what reading them took, for status.
func (f *S3Folder) Remote() string {
	return remoteSummary(fmt.Sprintf("%s, bucket %s", f.store.Endpoint(), f.bucket), f.store)
}
