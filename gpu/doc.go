// Package gpu is tsock's access to NVIDIA GPUs, behind interfaces with
// fakes so that everything but the real driver is tested on machines
// without one.
//
//   - Driver is the CUDA driver API on one device: OpenCUDA binds
//     libcuda.so.1 at run time (dlopen, tsock's own prototypes, the _v2
//     entry points), with the device's primary context made current inside
//     each call, never left current on a thread Go may reuse.
//   - Pool is a fixed set of equal slabs allocated once with cuMemAlloc
//     (plain memory: the only kind CUDA IPC exports), each exported once as
//     an IPC handle. A published batch occupies one slab; freeing the batch
//     returns it. Consumers open each slab's handle once and address
//     batches as (slab, offset).
//   - Monitor is NVML telemetry as a state machine: after a failed Init no
//     NVML function is called again (go-nvml would kill the process).
//
// gputest holds an in-process fake Driver and a fake libcuda.so built by
// the tests with gcc.
package gpu
