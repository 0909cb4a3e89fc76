// Package gpu is tsock's access to NVIDIA GPUs, behind interfaces with
// fakes so that everything but the real driver is tested on machines
// without one.
//
//   - Driver is the CUDA driver API on one device: OpenCUDA binds
//     libcuda.so.1 at run time (dlopen, tsock's own prototypes, the _v2
//     entry points), with the device's primary context made current inside
//     each call, never left current on a thread Go may reuse.
//   - Pool is a fixed set of equal, page-aligned slabs carved from one
//     cuMemAlloc made at start (plain memory: the only kind CUDA IPC
//     exports), exported once as one IPC handle. A published batch
//     occupies one slab; freeing the batch returns it. Consumers open the
//     handle once and address batches as (slab offset + offset). Uploads
//     page-lock the batch for the copy where the driver allows it, else
//     copy from pageable memory; the pool never mixes the two silently
//     (UploadPath says which).
//   - HostMemory and Stager are page-locked host memory, registration and
//     staged copies: what BenchmarkUpload compares on a real GPU.
//   - Monitor is NVML telemetry as a state machine: after a failed Init no
//     NVML function is called again (go-nvml would kill the process).
//
// gputest holds an in-process fake Driver and a fake libcuda.so built by
// the tests with gcc.
//
// What crosses its border: in, a device spec (cuda:N, GPU-UUID) and host
// bytes to upload; out, slabs and their IPC handle (a consumer's .cuda
// file), DeviceInfo and per-process memory for status. No other package
// calls the driver or NVML.
package gpu
