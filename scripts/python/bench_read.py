#!/usr/bin/python3
"""Read GB/s of files, as plain reads into one reused buffer (what a data
path can deliver, without any parsing), or through a read-only mapping
copied out once (--mmap: how the client reads batches).

    bench_read.py [--mmap] [--times] FILE...

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
times = "--times" in args
files = [a for a in args if a not in ("--mmap", "--times")]
size = max(os.path.getsize(f) for f in files)
buf = bytearray(size)
view = memoryview(buf)
wall = time.time()
start, total = time.perf_counter(), 0
for f in files:
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
