#!/usr/bin/env python3
"""Reads one tsock consumer's batches in order and reports its speed.

    read_batches.py MOUNT NAME [--join]

Needs only the standard library and numpy (through the tsock package). Each batch
is mapped (zero copy), every image byte is touched, and the file stays
open until the batch is dropped. Prints one JSON line: batches, images, bytes, wall
seconds, seconds blocked waiting for the producer, and the rates (over everything,
and over its last epoch alone: the steady state the benchmark compares).
"""
import argparse
import json
import os
import sys
import time

import tsock  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mount")
    ap.add_argument("name")
    ap.add_argument("--join", action="store_true", help="mkdir the consumer first")
    args = ap.parse_args()
    d = os.path.join(args.mount, "consumers", args.name)
    if args.join:
        os.mkdir(d)
    batches = images = nbytes = 0
    waited = 0.0
    started_at = time.time()  # wall clock: comparable across processes
    start = time.perf_counter()
    current_epoch, epoch_start, epoch_images = 0, start, 0
    last_end = start
    while True:
        path = os.path.join(d, "%06d.safetensors" % batches)
        t0 = time.perf_counter()
        try:
            batch = tsock.load_batch(path)  # blocks until produced
        except FileNotFoundError:
            break
        waited += time.perf_counter() - t0
        brightest = int(batch["images"].max())  # touches every byte, ~10 GB/s
        epoch = batch.epoch
        if epoch != current_epoch:  # an epoch ends where the next begins
            current_epoch, epoch_start, epoch_images = epoch, last_end, 0
        images += len(batch["labels"])
        epoch_images += len(batch["labels"])
        nbytes += batch.size
        del batch  # unmaps and closes: consumed
        batches += 1
        last_end = time.perf_counter()
    wall = time.perf_counter() - start
    busy = max(wall - waited, 1e-9)
    print(json.dumps({
        "consumer": args.name, "batches": batches, "images": images, "bytes": nbytes,
        "seconds": round(wall, 3), "waiting_seconds": round(waited, 3),
        "images_per_s": round(images / max(wall, 1e-9), 1),
        "last_epoch": current_epoch,
        "last_epoch_images_per_s": round(epoch_images / max(last_end - epoch_start, 1e-9), 1),
        "read_gb_per_s": round(nbytes / busy / 1e9, 3), "brightest": brightest if batches else None,
        "started_at": started_at, "ended_at": started_at + wall,
    }))


if __name__ == "__main__":
    sys.exit(main())
