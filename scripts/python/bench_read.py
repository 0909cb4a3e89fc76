#!/usr/bin/python3
"""Read GB/s of files, as plain reads into one reused buffer (what a data
path can deliver, without any parsing).

    bench_read.py FILE...    prints GB/s
"""
import os
import sys
import time

files = sys.argv[1:]
size = max(os.path.getsize(f) for f in files)
buf = bytearray(size)
view = memoryview(buf)
start, total = time.perf_counter(), 0
for f in files:
    with open(f, "rb", buffering=0) as fh:
        while True:
            n = fh.readinto(view)
            if not n:
                break
            total += n
print(round(total / (time.perf_counter() - start) / 1e9, 3))
