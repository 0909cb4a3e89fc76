package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/producer/source"
)

// fuzzedFlags are the flags FuzzMountFlags gives values to.
var fuzzedFlags = []string{"batch-size", "image-size", "epochs", "buffer", "cache", "shard-memory", "shard-index", "workers", "seed", "layout",
	"transform", "consumer-timeout", "straggler", "decoder", "join", "storage", "passthrough", "device",
	"gpu-buffer", "samples", "order", "gpu-slab", "source", "keep", "fetch"}

// FuzzMountFlags: any value of any mount flag, in either mode, parses
// into a usage error or into values the daemon can use; never a panic.
func FuzzMountFlags(f *testing.F) {
	for _, seed := range []struct {
		flag  uint8
		value string
		mode  bool
	}{
		{0, "256", false}, {0, "9223372036854775807", false}, {0, "-1", true}, {3, "16EiB", false},
		{3, "0.5B", true}, {9, "1ns", false}, {9, "-9223372036854775808ns", false}, {5, "1e9", false},
		{17, "4611686018427387904", true}, {20, "synthetic:9223372036854775807", false}, {20, "synthetic:-1", false},
		{15, "GPU-", false}, {15, "cuda:99999999999999999999", false}, {19, "1KiB", true},
	} {
		f.Add(seed.flag, seed.value, seed.mode)
	}
	f.Fuzz(func(t *testing.T, flag uint8, value string, ingestMode bool) {
		name := fuzzedFlags[int(flag)%len(fuzzedFlags)]
		args := []string{"/mnt/x", "--source", "synthetic:10"}
		if ingestMode {
			args = []string{"/mnt/x", "--ingest", "--device", "cuda:0"}
		}
		if name == "source" {
			args = []string{"/mnt/x"}
		}
		c := &mountCommand{}
		err := c.Parse(append(args, "--"+name+"="+value))
		if err != nil {
			var u usageError
			if !errors.As(err, &u) && !errors.Is(err, errHelp) {
				t.Fatalf("--%s=%q: %v is not a usage error", name, value, err)
			}
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatalf("--%s=%q: an empty message", name, value)
			}
			return
		}
		switch {
		case c.cfg.BatchSize < 1 || c.cfg.BatchSize > batchstore.MaxBatchSize:
			t.Fatalf("--%s=%q: batch size %d accepted", name, value, c.cfg.BatchSize)
		case c.eviction.Timeout < time.Millisecond:
			t.Fatalf("--%s=%q: consumer timeout %s accepted", name, value, c.eviction.Timeout)
		case c.ingestCfg.Samples < 0 || int64(c.ingestCfg.Samples) > maxSamples():
			t.Fatalf("--%s=%q: %d samples accepted", name, value, c.ingestCfg.Samples)
		}
		if c.buffer < 1 || c.buffer > maxSize {
			t.Fatalf("--%s=%q: buffer of %d bytes accepted", name, value, c.buffer)
		}
		if strings.HasPrefix(value, "synthetic:") { // a folder would be scanned: only the synthetic parser here
			source.Open(context.Background(), value, source.Options{}) // a bad source is refused at Run; it must not panic either
		}
	})
}
