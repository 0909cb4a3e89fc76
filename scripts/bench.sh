#!/usr/bin/env bash
# The proof, one command: measures tsock against torchvision and tmpfs on
# the same JPEGs, both real photographs (scripts/realphotos.sh: crops of
# Debian's wallpaper photos) and `tsock gendata` images, and prints a
# markdown table of medians of RUNS runs with the spread (min-max) of each
# ratio, every ratio taken within one run, tsock and the baseline one
# after the other in each run. A ratio whose spread crosses 1.0 reads "no
# difference".
#
#   scripts/bench.sh [IMAGES] [RUNS]     default 2000 images per set, 3 runs
#
# 1. producer images/s per core vs torchvision's per core, on both sets;
#    the producer in a mount (one worker, one reader) vs that benchmark
# 2. images/s delivered to N = 1, 2, 4, 8 consumers vs N torchvision
#    DataLoaders (batch 256, workers = cores/N; tsock batches of 64, so
#    that a third of an epoch holds several), on both sets: 3 whole
#    epochs, every image delivered over the span from the mount's start
#    (before the first join) or the loaders' start to the last read, with
#    a buffer of a third of an epoch: the producer cannot run ahead and be
#    timed as if it were the readers' speed. The N consumers join as the
#    N trials are launched (mkdir), and read once their Python is up: the
#    same epochs for all, where joins half a second apart would stitch
#    later joiners' epochs (files the daemon assembles), a cost that a
#    real epoch of a million images does not notice and one of a few
#    thousand does. Python's start-up is in both sides' time.
# 3. read GB/s from the mount vs the same files on /dev/shm, 1 and 4 readers
# 4. daemon memory + batch memory vs --buffer, 1 and 8 consumers
# 5. --ingest: one producer's write GB/s into ingest/ vs the same bytes
#    written to /dev/shm
# 6. --ingest: a torchvision pipeline of the user's own (RandAugment,
#    RandomErasing) served once to 4 consumers vs 4 DataLoaders, whole runs
# 7. --ingest: daemon memory + batch memory vs --buffer, 8 consumers
# 8. S3 on loopback vs a local folder, and a mount's open over 100,000
#    keys: scripts/bench_remote.sh; hostile Parquet files, the daemon's
#    peak memory: scripts/bench_parquet_hostile.sh
# 9. Subsets: 5-fold CV and disjoint quarters against DataLoaders over
#    the same parts: scripts/bench_subsets.sh
# 10. A whole Optuna sweep against the trials' own DataLoaders:
#    scripts/bench_sweep.sh
# 11. ImageNet's size (1,281,167 files; 1,282 shards): mount time and
#    daemon RSS after the mount and after 3 epochs: scripts/bench_scale.sh
# 12. Without root: read GB/s as a user without root (daemon reads)
#    against root's (passthrough, from huge pages and from a memfd's 4 KiB
#    pages), and the page cache's ceiling: scripts/bench_nonroot.sh
# 13. Validation accuracy of one training from its own DataLoader and
#    from tsock (a folder; class-sorted shards and Parquet), 5 seeds, SGD
#    with momentum: scripts/accuracy.sh
# 15. Data-parallel trials: 4 trials of 2 ranks on one mount (a group a
#    trial) against 8 DataLoaders with DistributedSampler, images a
#    second and exactness: scripts/bench_ddp.sh
# 16. Bytes read per node: three mounts as nodes, each serving a trial
#    of its own, against the three as the nodes of one trial (--node
#    K/3), from one S3 server: scripts/multinode.sh
# 14. Distinct labels in a batch of an epoch over class-sorted shards at
#    ImageNet's shape, against a uniform shuffle's
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the table alone on standard output; progress on standard error
TSOCK_SETUP_TORCH=1 scripts/setup.sh
source scripts/lib.sh

images=${1:-2000}
runs=${2:-3}
cores=$(nproc)
results="$work/results.txt"
trap 'cleanup; rm -rf /dev/shm/tsock-bench' EXIT

build_tsock
"$tsock" gendata "$work/data" --images "$images" --classes 10 --min-side 300 --max-side 600
scripts/realphotos.sh "$work/photos" "$images" >"$work/photos.txt"
go test -c -o "$work/producer.test" ./producer
sets=("$work/photos" "$work/data")
# bpp SET: bits per pixel of a folder of images.
bpp() {
	$py - "$1" <<'PY'
import os, sys
from PIL import Image
nb = npx = 0
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        p = os.path.join(root, f)
        nb += os.path.getsize(p)
        with Image.open(p) as im:
            npx += im.size[0] * im.size[1]
print(f"{8 * nb / npx:.2f}")
PY
}
echo "photos $(bpp "$work/photos")" >"$work/bpp.txt"
echo "gendata $(bpp "$work/data")" >>"$work/bpp.txt"
setname() { [[ $1 == "$work/photos" ]] && echo photos || echo gendata; }
# epoch_bytes SET: the batch bytes of one epoch of SET at 224 px, /3.
third_epoch() { echo $((images * (3 * 224 * 224 + 16) / 3)); }

# wait_idle: until the producer has made everything it will make.
wait_idle() {
	until [[ $(cat "$mnt/state") == idle ]]; do sleep 0.05; done
}
record() { echo "$*" >>"$results"; }
# sample_memory raises $peak to the daemon's memory plus batch memory now.
sample_memory() {
	local now
	now=$(($(awk '/^(RssAnon|RssFile):/ { s += $2 } END { print s * 1024 }' "/proc/$daemon/status") + $(shmem) - shmem0))
	((now > peak)) && peak=$now
	return 0
}

for run in $(seq "$runs"); do
	echo "== run $run of $runs" 

	for set in "${sets[@]}"; do
		name=$(setname "$set")
		# 1. One core each, same files, same transform, the whole set.
		ours=$(cd producer && TSOCK_BENCH_DIR="$set" "$work/producer.test" -test.run '^$' \
			-test.bench 'BenchmarkSample/turbo' -test.benchtime "${images}x" -test.cpu 1 |
			awk '/img\/s/ { for (i = 1; i <= NF; i++) if ($(i+1) == "img/s") print $i }')
		theirs=$($py scripts/python/bench_torchvision.py percore "$set" 1)
		record "percore-$name" "$ours" "$theirs"

		# 1b. The producer in a mount against that benchmark, the same
		#     run: --workers 1, one reader, 3 whole epochs, images over
		#     the span from the mount's start to the last read (the scan,
		#     the first epoch's verifying reads and the reader's start
		#     included); and the daemon's CPU seconds per image made (its
		#     FUSE work and copies into batches included) against the
		#     benchmark's seconds per image.
		mount_bg --source "$set" --batch-size 64 --workers 1 --epochs 3 --buffer "$(third_epoch)" >/dev/null
		began=$(date +%s.%N)
		$py scripts/python/read_batches.py "$mnt" w1 --join >"$work/w1.json"
		cpu=$(awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$daemon/stat")
		unmount
		inmount=$($py -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['images'] / (r['ended_at'] - float(sys.argv[2])), 1))" "$work/w1.json" "$began")
		record "inmount-$name" "$inmount" "$ours" "$($py -c "print($cpu / (3 * $images))")" "$($py -c "print(1 / $ours)")"

		# 2. Sharing: N consumers of one pipeline vs N separate loaders,
		#    3 whole epochs each, from the start to the last read.
		for n in 1 2 4 8; do
			rm -f "$work"/c*.json "$work"/t*.json
			mount_bg --source "$set" --batch-size 64 --epochs 3 --buffer "$(third_epoch)"
			began=$(date +%s.%N)
			for i in $(seq "$n"); do mkdir "$mnt/consumers/c$i"; done
			pids=()
			for i in $(seq "$n"); do
				$py scripts/python/read_batches.py "$mnt" "c$i" >"$work/c$i.json" &
				pids+=($!)
			done
			for p in "${pids[@]}"; do wait "$p"; done
			unmount
			shared=$($py -c "import json,sys; r=[json.load(open(f)) for f in sys.argv[2:]]; print(round(sum(x['images'] for x in r) / (max(x['ended_at'] for x in r) - float(sys.argv[1])), 1))" "$began" "$work"/c*.json)
			workers=$((cores / n))
			pids=()
			for i in $(seq "$n"); do
				$py scripts/python/bench_torchvision.py loader "$set" "$workers" 256 3 >"$work/t$i.json" &
				pids+=($!)
			done
			for p in "${pids[@]}"; do wait "$p"; done
			separate=$($py -c "import json,sys; r=[json.load(open(f)) for f in sys.argv[1:]]; print(round(sum(x['images'] for x in r) / (max(x['end'] for x in r) - min(x['start'] for x in r)), 1))" "$work"/t*.json)
			record "sharing-$name" "$n" "$shared" "$separate"
		done
	done

	# 3. Read GB/s: the mount (batches all produced, in memory) vs the same
	#    bytes on /dev/shm, one reader and four at once.
	mount_bg --source "$work/data" --batch-size 256 --epochs 1 --buffer 2GiB
	for c in copy r0 r1 r2 r3 r4; do mkdir "$mnt/consumers/$c"; done
	wait_idle
	rm -rf /dev/shm/tsock-bench && mkdir /dev/shm/tsock-bench
	cp "$mnt"/consumers/copy/*.safetensors /dev/shm/tsock-bench/
	one_mount=$($py scripts/python/bench_read.py "$mnt"/consumers/r0/*.safetensors)
	one_shm=$($py scripts/python/bench_read.py /dev/shm/tsock-bench/*.safetensors)
	four() { # four DIR…: aggregate GB/s of four readers, one directory each
		local start end bytes pids=()
		bytes=$(du -cb "$1"/*.safetensors | tail -1 | cut -f1)
		start=$(date +%s.%N)
		for d in "$@"; do
			$py scripts/python/bench_read.py "$d"/*.safetensors >/dev/null &
			pids+=($!)
		done
		for p in "${pids[@]}"; do wait "$p"; done
		end=$(date +%s.%N)
		$py -c "print(round(4 * $bytes / ($end - $start) / 1e9, 3))"
	}
	four_shm=$(four /dev/shm/tsock-bench /dev/shm/tsock-bench /dev/shm/tsock-bench /dev/shm/tsock-bench)
	four_mount=$(four "$mnt"/consumers/r{1,2,3,4})
	path=$(grep '^data path:' "$mnt/status" | cut -d';' -f1 | cut -c12-)
	unmount
	record read "$one_mount" "$one_shm" "$four_mount" "$four_shm" "$path"

	# 4. Memory: one copy whatever the number of consumers. They join, the
	#    buffer fills while they hold every batch, then they read it all.
	#    Peak of the daemon's own memory (RssAnon + RssFile; the batch pages
	#    it maps are counted once, below) plus batch memory as the kernel
	#    counts it (growth of Shmem: tmpfs and memfd pages).
	buffer=$((1 << 30))
	for n in 1 8; do
		shmem0=$(shmem)
		mount_bg --source "$work/data" --batch-size 64 --epochs 8 --buffer "$buffer" >/dev/null
		for i in $(seq "$n"); do mkdir "$mnt/consumers/m$i"; done
		peak=0
		until [[ $(cat "$mnt/state") == full ]]; do sample_memory; sleep 0.05; done
		pids=()
		for i in $(seq "$n"); do
			$py scripts/python/read_batches.py "$mnt" "m$i" >/dev/null &
			pids+=($!)
		done
		while kill -0 "${pids[0]}" 2>/dev/null; do sample_memory; sleep 0.05; done
		for p in "${pids[@]}"; do wait "$p"; done
		unmount
		record memory "$n" "$peak" "$buffer"
	done

	# 5. Ingest write GB/s: the same 24 batches (38.5 MB each) into the
	#    mount and into /dev/shm by the same writer, interleaved batch by
	#    batch. These VMs hand freed memory back to the host (free page
	#    reporting), so a page is warm or cold by luck: both sides share it.
	mount_bg --ingest --buffer 2GiB >/dev/null
	rm -rf /dev/shm/tsock-bench && mkdir /dev/shm/tsock-bench
	read -r ingest_side shm_side < <($py scripts/python/bench_ingest.py write "$mnt" /dev/shm/tsock-bench 24)
	wpath=daemon-writes
	unmount
	rm -rf /dev/shm/tsock-bench
	record ingest_write "$ingest_side" "$shm_side" "$wpath"

	# 6. The user's own torchvision pipeline: served once to 4 consumers vs
	#    4 DataLoaders (workers = cores/4), 2 epochs at 224 px, batch 256.
	#    The 4 processes of a side start at once, imports done (--go), as 4
	#    trials launched together. Aggregate images/s = every consumer's
	#    images over the span from their start (before joining, or building
	#    the DataLoader) to the last one's end: both epochs whole, workers'
	#    start included. The producer is up before, but makes nothing until
	#    a consumer joins (the order blocks).
	ex=scripts/examples/serve_torchvision.py
	rm -f "$work"/go-*
	aggregate() { $py -c "import json,sys; r=[json.load(open(f)) for f in sys.argv[1:]]; print(round(sum(x['images'] for x in r) / (max(x['end'] for x in r) - min(x['start'] for x in r)), 1))" "$@"; }
	mount_bg --ingest --samples "$images" --batch-size 256 --epochs 2 --buffer 2GiB >/dev/null
	$py $ex serve "$mnt" "$work/data" --epochs 0 --image-size 224 --batch-size 256 2>"$work/serve.log" &
	server=$!
	until grep -q "^serve_torchvision: serving" "$work/serve.log"; do sleep 0.05; done
	pids=()
	for i in 1 2 3 4; do
		$py $ex read "$mnt" --name "r$i" --epochs 2 --go "$work/go-r" >"$work/r$i.json" &
		pids+=($!)
	done
	until [[ $(grep -c ready "$work/go-r.ready" 2>/dev/null) -ge 4 ]]; do sleep 0.02; done
	touch "$work/go-r"
	for p in "${pids[@]}"; do wait "$p"; done
	unmount
	wait "$server"
	served=$(aggregate "$work"/r*.json)
	rm -f "$work"/r*.json
	pids=()
	for i in 1 2 3 4; do
		$py $ex loader "$work/data" --epochs 2 --image-size 224 --batch-size 256 --workers $((cores / 4)) --go "$work/go-l" >"$work/l$i.json" &
		pids+=($!)
	done
	until [[ $(grep -c ready "$work/go-l.ready" 2>/dev/null) -ge 4 ]]; do sleep 0.02; done
	touch "$work/go-l"
	for p in "${pids[@]}"; do wait "$p"; done
	separate=$(aggregate "$work"/l*.json)
	rm -f "$work"/l*.json
	record ingest_share "$served" "$separate"

	# 7. Ingest memory: 8 consumers join, a producer fills the 1 GiB buffer
	#    while they hold every batch, then they read 2.3 GB through it.
	shmem0=$(shmem)
	mount_bg --ingest --buffer "$buffer" >/dev/null
	for i in $(seq 8); do mkdir "$mnt/consumers/m$i"; done
	$py scripts/python/bench_ingest.py stream "$mnt" 60 &
	writer=$!
	peak=0
	until [[ $(cat "$mnt/state") == full ]]; do sample_memory; sleep 0.05; done
	pids=()
	for i in $(seq 8); do
		$py scripts/python/read_batches.py "$mnt" "m$i" >/dev/null &
		pids+=($!)
	done
	while kill -0 "${pids[0]}" 2>/dev/null; do sample_memory; sleep 0.05; done
	for p in "${pids[@]}" "$writer"; do wait "$p"; done
	unmount
	record ingest_memory 8 "$peak" "$buffer"
done

$py - "$results" "$images" "$runs" "$cores" "$work/bpp.txt" >&3 <<'PY'
import sys
sys.path.insert(0, "scripts/python")
from benchtable import bound, header, med, ratio
path, images, runs, cores, bppfile = sys.argv[1:6]
rows = [line.split(maxsplit=5) for line in open(path)]
bpp = dict(line.split() for line in open(bppfile))
def col(kind, i, key=None):
    return [float(r[i]) for r in rows if r[0] == kind and (key is None or r[1] == key)]
print(f"## tsock benchmark: {images} JPEGs per set, {cores} cores, medians of {runs} runs (min-max of each ratio)\n")
print(f"Sets: real photographs (scripts/realphotos.sh, {bpp['photos']} bits per pixel) and `tsock gendata` images "
      f"(300-600 px, {bpp['gendata']} bits per pixel).\n")
print(header(""))
for name, label in (("photos", "real photos"), ("gendata", "gendata")):
    ours, theirs = col(f"percore-{name}", 1), col(f"percore-{name}", 2)
    print(f"| {label}: producer, images/s per core (read+decode+crop+resize+flip, uint8) | {med(ours):.0f} | torchvision {med(theirs):.0f} | {ratio(ours, theirs)} |")
    m, b = col(f"inmount-{name}", 1), col(f"inmount-{name}", 2)
    print(f"| {label}: producer in a mount, --workers 1, one reader, images/s over 3 whole epochs | {med(m):.0f} | BenchmarkSample {med(b):.0f} | {ratio(m, b)} |")
    m, b = col(f"inmount-{name}", 3), col(f"inmount-{name}", 4)
    print(f"| {label}: CPU per image made, the mount's daemon (lower is better; ratio: benchmark / daemon) | {1e6 * med(m):.0f} us | BenchmarkSample {1e6 * med(b):.0f} us | {ratio(b, m)} |")
    for n in ("1", "2", "4", "8"):
        s, t = col(f"sharing-{name}", 2, n), col(f"sharing-{name}", 3, n)
        print(f"| {label}: {n} consumer(s), images/s delivered all together, 3 whole epochs | {med(s):.0f} | {n} torchvision DataLoader(s) {med(t):.0f} | {ratio(s, t)} |")
for label, a, b in (("1 reader", 1, 2), ("4 readers", 3, 4)):
    m, s = col("read", a), col("read", b)
    print(f"| read GB/s, {label} | {med(m):.2f} | /dev/shm {med(s):.2f} | {ratio(m, s)} |")
for n in ("1", "8"):
    peak, buf = col("memory", 2, n), col("memory", 3, n)
    print(f"| peak daemon memory + batch memory (Shmem), {n} consumer(s), buffer full | {med(peak) / 2**20:.0f} MiB | --buffer {med(buf) / 2**20:.0f} MiB | {bound(peak, buf)} |")
a, b = col("ingest_write", 1), col("ingest_write", 2)
print(f"| ingest: one producer's write GB/s (24 batches of 38.5 MB, tsock.Producer.publish) | {med(a):.2f} | /dev/shm {med(b):.2f} | {ratio(a, b)} |")
a, b = col("ingest_share", 1), col("ingest_share", 2)
print(f"| ingest: own torchvision pipeline (RandAugment + RandomErasing, 224 px) served to 4 consumers, images/s all together, 2 whole epochs | {med(a):.0f} | 4 DataLoaders {med(b):.0f} | {ratio(a, b)} |")
peak, buf = col("ingest_memory", 2), col("ingest_memory", 3)
print(f"| ingest: peak daemon memory + batch memory (Shmem), 8 consumers, buffer full | {med(peak) / 2**20:.0f} MiB | --buffer {med(buf) / 2**20:.0f} MiB | {bound(peak, buf)} |")
wpaths = {r[3].strip() for r in rows if r[0] == "ingest_write" and len(r) > 3}
print(f"\ningest write path: {', '.join(sorted(wpaths))}")
paths = {r[5].strip() for r in rows if r[0] == "read" and len(r) > 5}
print(f"\ndata path: {', '.join(sorted(paths))}")
PY

# 8. Data in object storage: its own table (see the script).
scripts/bench_remote.sh "$images" "$runs" >&3
scripts/bench_parquet_hostile.sh "$runs" >&3

# 9. Subsets: its own table (see the script).
scripts/bench_subsets.sh "$images" "$runs" >&3

# 10. A whole sweep: its own table (see the script).
scripts/bench_sweep.sh 1000 "$runs" >&3

# 11. ImageNet's size: its own table (see the script).
scripts/bench_scale.sh 3 "$runs" >&3

# 12. Without root: its own table (see the script).
scripts/bench_nonroot.sh "$runs" >&3

# 13. Accuracy: the same training from its own DataLoader and from tsock
# (a folder; class-sorted shards and Parquet): its own table (see the script).
scripts/accuracy.sh 600 5 6 sgd >&3

# 14. How an epoch over class-sorted shards mixes at ImageNet's shape
# (1,282 shards of 1,000, 1,000 classes, batches of 256, the default
# shard memory, the shard disk sized by tsock): distinct labels in a
# batch against a uniform shuffle's, the pieces, the window, the disk.
CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations" go test ./producer/source -run '^$' -bench ImageNetShapeMix -benchtime 1x | grep '^imagenet-shape' >&3

# 15. Data-parallel trials: its own table (see the script).
scripts/bench_ddp.sh 1000 "$runs" >&3

# 16. Bytes read per node, whole data against each node's share (--node
# K/3): its own table (see the script).
scripts/multinode.sh 600 "streaming node-share" >&3
