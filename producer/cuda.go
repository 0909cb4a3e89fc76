package producer

import (
	"github.com/tsock/tsock/gpu"
	"github.com/tsock/tsock/producer/batchfile"
)

// NewCUDAFiles returns the renderer of .cuda files for batches in pool.
func NewCUDAFiles(pool *gpu.Pool) batchfile.CUDAFiles {
	return batchfile.CUDAFiles{Device: pool.Driver().Info().UUID, MaxSlab: len(pool.Slabs()) - 1}
}
