#!/usr/bin/env bash
# The main job on a built-in dataset: builds tsock, writes a small JPEG
# dataset, mounts it, and has 1 then 3 consumer processes read one epoch
# each from one shared pipeline; prints their images/s, read GB/s and the
# mount's status, and unmounts.
#
#   scripts/demo.sh [IMAGES]        default 1000 images of 300-600 px
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/lib.sh

images=${1:-1000}

echo "== building tsock"
build_tsock
echo "== writing $images JPEGs (300-600 px, 10 classes)"
"$tsock" gendata "$work/data" --images "$images" --classes 10

run_phase() { # run_phase N: a fresh mount, N consumers reading one epoch
	local n=$1
	# A buffer well under the epoch: the producer cannot run far ahead of
	# the readers, and the clock starts when the mount does, before the
	# first join, so a pre-filled buffer cannot flatter the rate.
	mount_bg --source "$work/data" --batch-size 64 --epochs 1 --buffer 64MiB
	local began
	began=$(date +%s.%N)
	# The trials join as they are launched, and read once Python is up.
	for i in $(seq "$n"); do mkdir "$mnt/consumers/trial-$i"; done
	local pids=()
	for i in $(seq "$n"); do
		"$py" scripts/python/read_batches.py "$mnt" "trial-$i" >"$work/reader-$i.json" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	echo "-- $n consumer(s), one epoch each:"
	"$py" - "$work" "$n" "$began" "$mnt/metrics" <<'PY'
import json, sys
work, n, began, metrics = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
rows = [json.load(open(f"{work}/reader-{i}.json")) for i in range(1, n + 1)]
for r in rows:
    print(f"   {r['consumer']}: {r['images']} images in {r['seconds']} s = {r['images_per_s']} images/s; "
          f"read {r['read_gb_per_s']} GB/s while not waiting for the producer")
span = max(r["ended_at"] for r in rows) - began
images = sum(r["images"] for r in rows)
made = next(float(l.split()[1]) for l in open(metrics) if l.startswith("tsock_samples_published_total "))
print(f"   all consumers together: {images} images in {span:.2f} s from the mount's start = "
      f"{images / span:.0f} images/s delivered; the producer made {made:.0f} images, {made / span:.0f}/s")
PY
	echo "-- tsock status $mnt:"
	"$tsock" status "$mnt" | sed 's/^/   /'
	unmount
}

echo "== phase 1: one consumer"
run_phase 1
echo "== phase 2: three consumers sharing one pipeline"
run_phase 3
echo "== done: unmounted cleanly"
