#!/usr/bin/python3
"""Read GB/s of files, as plain reads into one reused buffer (what a data
path can deliver, without any parsing), through a read-only mapping
copied out once (--mmap), or as a training gets batches from the shipped
client (--client: tsock.batchfile.load_batch, from tsock's package in
client/ beside this file, or beside it, or on the path, every array copied into one
preallocated buffer; around FUSE where the daemon offers its direct
path, unless TSOCK_DIRECT=0).

    bench_read.py [--mmap | --client] [--times] FILE...

prints GB/s; with --times also the bytes read and the wall-clock start and
end (seconds since the epoch), so that readers run side by side can be
summed over their common span.
"""
import mmap
import os
import sys
import time

args = sys.argv[1:]
use_mmap = "--mmap" in args
use_client = "--client" in args
times = "--times" in args
files = [a for a in args if a not in ("--mmap", "--client", "--times")]
if use_client:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [os.path.join(here, "client"), here]
    import numpy as np
    from tsock import batchfile
size = max(os.path.getsize(f) for f in files)
buf = bytearray(size)
view = memoryview(buf)
around = False
wall = time.time()
start, total = time.perf_counter(), 0
for f in files:
    if use_client:
        b = batchfile.load_batch(f)
        if b.direct and not around:  # as tsock.Consumer tells the daemon
            around = True
            try:
                with open(os.path.join(os.path.dirname(f), "read_ahead"), "wb", buffering=0) as ra:
                    ra.write(b"0\n")
            except OSError:
                pass
        out = np.frombuffer(buf, dtype=np.uint8)
        off = 0
        for arr in b.values():
            flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
            out[off:off + flat.size] = flat
            off += flat.size
        total += off
        del b, flat
        continue
    with open(f, "rb", buffering=0) as fh:
        if use_mmap:
            n = os.fstat(fh.fileno()).st_size
            with mmap.mmap(fh.fileno(), n, prot=mmap.PROT_READ) as m:
                buf[:n] = m
            total += n
            continue
        while True:
            n = fh.readinto(view)
            if not n:
                break
            total += n
elapsed = time.perf_counter() - start
rate = round(total / elapsed / 1e9, 3)
print(f"{rate} {total} {wall:.6f} {wall + elapsed:.6f}" if times else rate)
