// Package gpu will hold NVML telemetry and the CUDA driver calls that
// export GPU-resident batches as IPC handles, behind interfaces with
// fakes. It is empty until GPU mode lands; the build machines have no GPU.
package gpu
