#!/usr/bin/env python3
"""Ingest benchmarks for scripts/bench.sh: one producer's write speed.

    bench_ingest.py write MOUNT SHMDIR BATCHES
        writes BATCHES image batches (256x3x224x224 uint8 + labels, 38.5 MB)
        into MOUNT/ingest/ through tsock.Producer.publish, and as many as
        plain files into SHMDIR with the same writer, interleaved batch by
        batch (which goes first alternates): memory on these VMs is warm or
        cold by luck, and both sides must draw from the same luck. Each
        batch is timed from create to close; prints both sides' GB/s
    bench_ingest.py stream MOUNT BATCHES
        publishes BATCHES such batches, unordered, for the memory row
"""
import os
import sys
import time

import numpy as np

import tsock  # noqa: E402

IMAGES = np.random.default_rng(0).integers(0, 256, (256, 3, 224, 224), np.uint8)
LABELS = np.arange(256, dtype=np.int64)


def write(mount, shm, batches):
    batch = {"images": IMAGES, "labels": LABELS}
    p = tsock.Producer(mount)
    tensors, _ = tsock.batchfile.flatten(batch)
    sides = {"mount": lambda i: p.publish(batch),
             "shm": lambda i: tsock.batchfile.write_batch(os.path.join(shm, "%06d.safetensors" % i), tensors, {})}
    seconds = {"mount": 0.0, "shm": 0.0}
    for i in range(int(batches)):
        for side in ("mount", "shm") if i % 2 == 0 else ("shm", "mount"):
            start = time.perf_counter()
            sides[side](i)
            seconds[side] += time.perf_counter() - start
    nbytes = int(batches) * (IMAGES.nbytes + LABELS.nbytes)
    print(round(nbytes / seconds["mount"] / 1e9, 3), round(nbytes / seconds["shm"] / 1e9, 3))


def stream(mount, batches):
    p = tsock.Producer(mount)
    for i in range(batches):
        p.publish({"images": IMAGES, "labels": LABELS}, epoch=0, last=i == batches - 1)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        stream(sys.argv[2], int(sys.argv[3]))
