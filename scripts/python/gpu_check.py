#!/usr/bin/env python3
"""The consumer sides of scripts/gpu-check.sh, on a real GPU (CuPy, and
PyTorch for the release check).

    gpu_check.py compare MNT NAME BATCH_SIZE
        every tensor a consumer maps through CUDA IPC equals, on the GPU,
        the same batch's .safetensors (read by a twin consumer NAME-host)
    gpu_check.py hold MNT NAME COUNT
        maps COUNT batches' tensors, prints "holding PID", and waits to be
        killed
    gpu_check.py release MNT
        drops each batch while a queued kernel still reads it: what the
        kernel copied must be that batch, not the next one tsock uploads
        into the freed memory
"""
import os
import sys
import time

import numpy as np

import tsock  # noqa: E402


def host_twin(mount, name, size):
    """A consumer of the same batches, read from their files."""
    d = os.path.join(mount, "consumers", name + "-host")
    os.mkdir(d)
    with open(os.path.join(d, "batch_size"), "w") as f:
        f.write(f"{size}\n")
    return lambda i: tsock.load_batch(os.path.join(d, "%06d.safetensors" % i))


def compare(mount, name, size):
    import cupy

    host_batch = host_twin(mount, name, size)
    n = 0
    with tsock.cuda_batches(mount, name=name, batch_size=size) as c:
        for i, b in enumerate(c):
            host = host_batch(i)
            for t in ("images", "labels", "indices"):
                got = cupy.asnumpy(cupy.asarray(b[t])).reshape(host[t].shape)
                if not np.array_equal(got, host[t]):
                    sys.exit(f"{name} batch {i}: {t} differ between the GPU and the file")
            n += len(host["labels"])
            del host, b
    print(f"{name}: {n} samples in batches of {size}, every tensor on the GPU equals its .safetensors")


def hold(mount, name, count):
    import cupy

    held = []
    with tsock.cuda_batches(mount, name=name) as c:
        for b in c:
            int(cupy.asarray(b["images"]).sum())  # mapped and read on the GPU
            held.append(b)
            if len(held) == count:
                break
        print(f"holding {os.getpid()}", flush=True)
        while True:
            time.sleep(1)


def release(mount):
    import torch

    host_batch = host_twin(mount, "release", 32)
    # TSOCK_GPU_CHECK_NOSYNC: release without waiting, to see the check fail.
    nosync = (lambda: None) if os.environ.get("TSOCK_GPU_CHECK_NOSYNC") else None
    n = 0
    with tsock.cuda_batches(mount, name="release", batch_size=32, synchronize=nosync) as c:
        batches = iter(c)
        b = next(batches, None)
        while b is not None:
            want = np.array(host_batch(n)["images"])  # a copy: the host twin lets go
            x = torch.as_tensor(b["images"], device="cuda")
            torch.cuda._sleep(1_000_000_000)  # about half a second of GPU time, queued
            copied = x.clone()  # runs after the sleep, reading the batch
            del x, b
            # As in a training loop that does not wait for its step: asking
            # for the next batch releases this one (tsock then uploads a
            # later batch into its slab) while the clone is still queued.
            b = next(batches, None)
            got = copied.cpu().numpy()
            if not np.array_equal(got, want):
                sys.exit(f"batch {n}: a kernel queued before the release read other bytes "
                         f"({int((got != want).sum())} of {got.size} differ): tsock reused the memory under it")
            n += 1
    print(f"release: {n} batches released with a kernel still reading them, every kernel read its own batch")


if __name__ == "__main__":
    cmd, mount = sys.argv[1], sys.argv[2]
    if cmd == "compare":
        compare(mount, sys.argv[3], int(sys.argv[4]))
    elif cmd == "hold":
        hold(mount, sys.argv[3], int(sys.argv[4]))
    elif cmd == "release":
        release(mount)
    else:
        sys.exit(f"unknown command {cmd}")
