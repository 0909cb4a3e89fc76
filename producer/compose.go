package producer

import (
	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/batchstore/batchfile"
)

// StoreConfig is the store configuration that matches cfg.
func StoreConfig(cfg Config, limit int64) batchstore.Config {
	return batchstore.Config{
		Limit: limit, BatchSize: cfg.BatchSize, Epochs: cfg.Epochs, Samples: cfg.Source.Len(),
		SizeOf:  func(n int) int64 { return int64(batchfile.NewLayout(n, cfg.ImageSize).Size) },
		Measure: batchfile.Measure,
		Node:    storeNode(cfg),
	}
}
