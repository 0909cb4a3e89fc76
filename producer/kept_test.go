package producer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/memfile"
	"github.com/tsock/tsock/producer"
	"github.com/tsock/tsock/producer/pipeline"
	"github.com/tsock/tsock/producer/producertest"
	"github.com/tsock/tsock/producer/source"
)

// TestKeptSamplesServeLaterEpochs: with --transform eval and --keep, the
// samples made in the first epoch are kept and copied into every later
// one, byte for byte what decoding them again gives; a --keep too small
// for the set keeps what fits and makes the rest as before.
func TestKeptSamplesServeLaterEpochs(t *testing.T) {
	folder := producertest.Folder(t, 12, 3)
	src, err := source.Open(context.Background(), folder, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	keptServe(t, src)
	// The same rows as Parquet files (row groups of 2): kept as a folder's
	// samples are, while their file is the version indexed.
	keptServe(t, producertest.OpenShards(t, producertest.Parquet(t, folder, producertest.ParquetOptions{Files: 2, RowsPerGroup: 2})))
}

func keptServe(t *testing.T, src source.Source) {
	eval := func(keep int64) producer.Config {
		cfg := producertest.Config(src, 4, 3, 2)
		cfg.Transform, cfg.Keep = pipeline.Eval, keep
		return cfg
	}
	decoded := producertest.Produce(t, eval(0))
	sample := int64(3 * 12 * 12)
	for _, tc := range []struct {
		keep                   int64
		samples                int
		served, refusedAtLeast uint64
	}{
		{1 << 30, 12, 24, 0},  // all kept: epochs 2 and 3 decode nothing
		{3 * sample, 3, 6, 9}, // three fit: the other nine are made every epoch
	} {
		cfg := eval(tc.keep)
		store := batchstore.New(producer.StoreConfig(cfg, cfg.BatchBytes()*3))
		p, err := producer.New(cfg, store, memfile.NewMemFD())
		if err != nil {
			t.Fatal(err)
		}
		producertest.EqualBatches(t, decoded, producertest.ProduceWith(t, p, store), "decoded and kept")
		store.Close()
		st, ok := p.Kept()
		if !ok || st.Samples != tc.samples || st.Served != tc.served || st.Refused < tc.refusedAtLeast || st.Used > tc.keep {
			t.Errorf("--keep %d: %+v", tc.keep, st)
		}
	}
	cfg := producertest.Config(src, 4, 1, 1)
	cfg.Keep = 1 << 20
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "deterministic") {
		t.Errorf("--keep with random crops: %v", err)
	}
}
