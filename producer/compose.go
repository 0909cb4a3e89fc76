package producer

import (
	"github.com/tsock/tsock/batchstore"
	"github.com/tsock/tsock/producer/batchfile"
)

// StoreConfig is the store configuration that matches cfg.
func StoreConfig(cfg Config, limit int64) batchstore.Config {
	return batchstore.Config{
		Limit: limit, BatchSize: cfg.BatchSize, Epochs: cfg.Epochs, Samples: cfg.Source.Len(),
		SizeOf:  func(n int) int64 { return int64(newBatchLayout(n, cfg.ImageSize).size) },
		Measure: batchfile.Measure,
	}
}
