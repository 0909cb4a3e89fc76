package producer

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tsock/tsock/producer/remote"
)

// Source is a dataset: samples numbered 0..Len()-1 in a fixed order, each
// with a class label.
type Source interface {
	// Describe names the source for status files.
	Describe() string
	// Len is the number of samples.
	Len() int
	// Classes are the class names; labels index into them.
	Classes() []string
	// Label is sample i's class.
	Label(i int) int
	// Name identifies sample i in error messages (a path for files).
	Name(i int) string
	// Load decodes sample i into dst. scratch is the worker's own buffer
	// for encoded bytes, kept between calls to avoid garbage.
	Load(i int, dst *RGB, scratch *[]byte) error
}

// Open parses a --source value: a directory in ImageFolder form, tar
// shards in WebDataset form (a path, glob or brace pattern ending in
// .tar), or "synthetic:N" for N generated images.
func Open(spec string) (Source, error) {
	return OpenContext(context.Background(), spec, remote.DefaultConfig())
}

// OpenContext is Open with a context that bounds every remote request,
// then and later (the mount's: a stopping daemon waits on no retry), and
// how to reach an object store for s3:// sources.
func OpenContext(ctx context.Context, spec string, s3 remote.Config) (Source, error) {
	if IsS3Spec(spec) {
		store, err := remote.Dial(s3)
		if err != nil {
			return nil, fmt.Errorf("source %q: %w", spec, err)
		}
		bucket, key, err := ParseS3Spec(spec)
		if err != nil {
			return nil, err
		}
		if IsShardSpec(key) {
			return OpenS3Shards(ctx, spec, store)
		}
		return OpenS3Folder(ctx, bucket, key, store)
	}
	if rest, ok := strings.CutPrefix(spec, "synthetic:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n <= 0 || n > maxSynthetic {
			return nil, fmt.Errorf("source %q: synthetic:N needs a positive whole number of images, at most %d", spec, maxSynthetic)
		}
		return NewSynthetic(n, 10), nil
	}
	if spec == "" {
		return nil, fmt.Errorf("source: no directory given")
	}
	if IsShardSpec(spec) {
		return OpenShards(spec)
	}
	return ScanFolder(spec)
}

// maxSynthetic bounds synthetic:N: the producer keeps each epoch's order,
// 8 bytes a sample, and a typo must not ask for terabytes.
const maxSynthetic = 1 << 28

// loadEncoded is Load for a source that keeps its samples encoded: read,
// then decode.
func loadEncoded(src EncodedSource, i int, dst *RGB, scratch *[]byte) error {
	data, err := src.Encoded(i, scratch)
	if err != nil {
		return err
	}
	return decodeImage(data, dst)
}

// Underlying is the source under a Cache (the source itself otherwise):
// what it is, for what only that kind of source does.
func Underlying(src Source) Source {
	if c, ok := src.(*Cache); ok {
		return c.EncodedSource
	}
	return src
}
