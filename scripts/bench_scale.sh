#!/usr/bin/env bash
# ImageNet's size, measured: a folder of 1,281,167 files in 1,000 classes
# and 1,282 tar shards of 1,000 samples (hard links of one tiny JPEG, one
# tiny shard: the set is made in seconds; its images decode in
# microseconds, so what is measured is tsock's per-sample cost, not the
# pipeline's). For each: the mount's time to ready, the daemon's RSS after
# the mount and after EPOCHS epochs read by one consumer, and its peak
# (the daemon maps no batch: its RssShmem stays 0, so --buffer is not in
# these). Shards run three times: indexed at mount (--shard-index none)
# with the default --shard-memory (512MiB, held in the daemon's own
# anonymous maps) and with 64MiB, then reading the index file an earlier
# mount wrote (what every mount but a node's first of a dataset does).
# Prints markdown table rows (medians of RUNS runs, min-max).
#
#   scripts/bench_scale.sh [EPOCHS] [RUNS]     default 3 epochs, 3 runs
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the rows alone on standard output
TSOCK_SETUP_TORCH=1 scripts/setup.sh
source scripts/lib.sh
epochs=${1:-3}
runs=${2:-3}
build_tsock
"$py" - "$work" <<'PY'
import io, os, sys, tarfile
from PIL import Image
work = sys.argv[1]
buf = io.BytesIO()
Image.new("RGB", (8, 8), (120, 60, 30)).save(buf, "JPEG", quality=90)
jpeg = buf.getvalue()
folder = os.path.join(work, "folder")
n = 0
for c in range(1000):  # ImageNet's 1,281,167: 1,281 or 1,282 a class
    d = os.path.join(folder, f"n{c:08d}")
    os.makedirs(d)
    for i in range(1281 + (c < 167)):
        one = os.path.join(work, f"one-{n // 60000}.jpg")  # ext4 allows 65,000 links a file
        if n % 60000 == 0:
            open(one, "wb").write(jpeg)
        os.link(one, os.path.join(d, f"n{c:08d}_{i}.JPEG"))
        n += 1
shards = os.path.join(work, "shards")
os.makedirs(shards)
tar = os.path.join(work, "one.tar")
with tarfile.open(tar, "w", format=tarfile.USTAR_FORMAT) as t:
    for i in range(1000):
        for ext, data in ((".jpg", jpeg), (".cls", f"{i % 1000}\n".encode())):
            info = tarfile.TarInfo(f"{i:06d}{ext}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
for s in range(1282):
    os.link(tar, os.path.join(shards, f"train-{s:06d}.tar"))
print(f"{n} files in 1000 classes, 1282 shards of 1000", file=sys.stderr)
PY
rss() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$daemon/status"; }
hwm() { awk '/^VmHWM:/ { print $2 * 1024 }' "/proc/$daemon/status"; }
# The earlier mount that writes the index file the shards-indexed runs read.
mount_bg --source "$work/shards/train-{000000..001281}.tar" --shard-index "$work/train.idx" --epochs 1 >/dev/null
unmount
for run in $(seq "$runs"); do
	for kind in folder shards shards-64 shards-indexed; do
		src="$work/folder" more=()
		[[ $kind == shards* ]] && src="$work/shards/train-{000000..001281}.tar" more=(--shard-index none)
		[[ $kind == shards-64 ]] && more+=(--shard-memory 64MiB)
		[[ $kind == shards-indexed ]] && more=(--shard-index "$work/train.idx")
		echo "== $kind, run $run of $runs"
		start=$(date +%s.%N)
		mount_bg --source "$src" --image-size 8 --batch-size 1024 --epochs "$epochs" --buffer 64MiB --workers "$(nproc)" "${more[@]}" >/dev/null
		ready=$(date +%s.%N)
		after_mount=$(rss)
		"$py" - "$mnt" <<'PY'
import os, sys
d = os.path.join(sys.argv[1], "consumers", "c")
os.mkdir(d)
j = 0
while True:
    try:
        with open(os.path.join(d, f"{j:06d}.safetensors"), "rb") as f:
            f.read()
    except FileNotFoundError:
        break
    j += 1
print(f"{j} batches", file=sys.stderr)
PY
		echo "scale $kind $(awk "BEGIN { print $ready - $start }") $after_mount $(rss) $(hwm)" >>"$work/results.txt"
		unmount
	done
done
"$py" - "$work/results.txt" "$epochs" >&3 <<'PY'
import sys
sys.path.insert(0, "scripts/python")
from benchtable import header, med, spread
path, epochs = sys.argv[1:3]
rows = [line.split() for line in open(path)]
print(header(f"\n### ImageNet's size: medians of {len(rows) // 4} runs (min-max)"))
for kind, label in (("folder", "a folder of 1,281,167 files"), ("shards", "1,282 local tar shards of 1,000"),
                    ("shards-64", "1,282 local tar shards of 1,000, --shard-memory 64MiB"),
                    ("shards-indexed", "1,282 local tar shards of 1,000, the index file of an earlier mount")):
    rs = [r for r in rows if r[1] == kind]
    col = lambda k, scale=1: [float(r[k]) / scale for r in rs]
    print(f"| {label}: mount to ready, s | {med(col(2)):.1f} ({spread(col(2), '.1f')}) | | |")
    print(f"| {label}: daemon RSS after the mount, MiB | {med(col(3, 2**20)):.0f} ({spread(col(3, 2**20), '.0f')}) | | |")
    print(f"| {label}: daemon RSS after {epochs} epochs, MiB | {med(col(4, 2**20)):.0f} ({spread(col(4, 2**20), '.0f')}) | peak {med(col(5, 2**20)):.0f} | |")
PY
