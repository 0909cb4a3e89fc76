package source_test

import (
	"context"
	"testing"

	"github.com/tsock/tsock/batchstore/batchfile"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
	"github.com/tsock/tsock/producer/source/remote/s3test"
)

// TestEvalOverS3ServesEveryEpoch: the README's eval mount over a bucket
// (--transform eval, so samples are kept after their first making, and
// reads ahead, as every s3:// source has): ImageFolder keys, and tar
// shards read a sample at a time (--shard-memory 0), give three exact
// epochs, byte for byte what the local folder gives decoding every epoch.
// (Before: epoch 0, then nothing: a kept sample never took what was
// read ahead for it, and the window of reads ahead stayed full.)
func TestEvalOverS3ServesEveryEpoch(t *testing.T) {
	server := s3test.Start(t, "data")
	dir := producertest.Folder(t, 40, 4)
	uploadFolder(t, server, "data", "val/", dir)
	shards := uploadShards(t, server, "data", producertest.Shards(t, dir, 9))
	folder, err := source.Open(context.Background(), dir, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eval := func(t *testing.T, src source.Source, keep int64) []*batchfile.Batch {
		t.Helper()
		cfg := producertest.Config(src, 8, 3, 2)
		cfg.Transform, cfg.Keep, cfg.Fetch = pipeline.Eval, keep, 8
		return producertest.Produce(t, cfg)
	}
	want := eval(t, folder, 0)
	for _, spec := range []struct {
		name   string
		spec   string
		memory int64
	}{{"keys", "s3://data/val", -1}, {"shards read a sample at a time", shards, 0}} {
		t.Run(spec.name, func(t *testing.T) {
			opts := source.Options{S3: s3Config(server.Endpoint)}
			if spec.memory >= 0 {
				opts.Shards = &source.ShardSpace{Memory: spec.memory, Batch: 8}
			}
			src, err := source.Open(context.Background(), spec.spec, opts)
			if err != nil {
				t.Fatal(err)
			}
			producertest.EqualBatches(t, want, eval(t, src, 1<<30), "the local folder decoded every epoch and the bucket's kept")
		})
	}
}
