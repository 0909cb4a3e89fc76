package source

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzS3Keys: any --source s3:// value and any key a listing may hold
// parse without a panic, into parts S3 allows, that spell the input again.
func FuzzS3Keys(f *testing.F) {
	for _, s := range []string{"s3://data/train/", "s3://b", "s3://data/shards/x-{000..009}.tar", "s3:///k", "s3://a.b-c/\x00", "s3://UPPER/k"} {
		f.Add(s, "train/n01/a.JPEG", int64(100))
	}
	f.Fuzz(func(t *testing.T, spec, key string, size int64) {
		bucket, k, err := ParseS3Spec(spec)
		if err == nil {
			if len(bucket) < 3 || len(bucket) > 63 || !utf8.ValidString(k) || "s3://"+bucket+"/"+k != spec && "s3://"+bucket != spec {
				t.Fatalf("%q parsed as bucket %q, key %q", spec, bucket, k)
			}
		}
		dir := k
		if dir != "" && !strings.HasSuffix(dir, "/") {
			dir += "/"
		}
		if name, ok := imageName(dir, key, size); ok && (dir+name != key || name == "" || size <= 0 || size > maxFileSize) {
			t.Fatalf("key %q (%d bytes) under %q: name %q", key, size, dir, name)
		}
		_ = validClass(key)
	})
}

// SetListProgressEvery makes a listing report its progress every d, for
// a test to see the reports without a long listing; it returns the undo.
func SetListProgressEvery(d time.Duration) (restore func()) {
	old := listProgressEvery
	listProgressEvery = d
	return func() { listProgressEvery = old }
}
