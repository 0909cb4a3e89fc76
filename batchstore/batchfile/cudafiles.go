package batchfile

import (
	"github.com/tsock/tsock/gpu"
)

// NewCUDAFiles returns the renderer of .cuda files for batches in pool.
func NewCUDAFiles(pool *gpu.Pool) CUDAFiles {
	return CUDAFiles{Device: pool.Driver().Info().UUID, MaxSlab: len(pool.Slabs()) - 1}
}
