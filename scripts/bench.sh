#!/usr/bin/env bash
# The proof, one command: measures tsock against torchvision and tmpfs on
# the same generated JPEGs and prints a markdown table of medians of RUNS
# runs, every ratio taken within one run.
#
#   scripts/bench.sh [IMAGES] [RUNS]     default 1000 images, 3 runs
#
# 1. producer images/s per core vs torchvision's per core
# 2. images/s delivered to N = 1, 2, 4 consumers vs N torchvision DataLoaders
#    (batch 256, workers = cores/N; the second of two epochs, whole)
# 3. read GB/s from the mount vs the same files on /dev/shm, 1 and 4 readers
# 4. daemon memory + batch memory vs --buffer, 1 and 8 consumers
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the table alone on standard output; progress on standard error
TSOCK_SETUP_TORCH=1 scripts/setup.sh
source scripts/lib.sh

images=${1:-1000}
runs=${2:-3}
cores=$(nproc)
py=/usr/bin/python3
results="$work/results.txt"
trap 'cleanup; rm -rf /dev/shm/tsock-bench' EXIT

build_tsock
"$tsock" gendata "$work/data" --images "$images" --classes 10 --min-side 300 --max-side 600 
go test -c -o "$work/producer.test" ./producer 

# wait_idle: until the producer has made everything it will make.
wait_idle() {
	until grep -q "^state: idle" "$mnt/status"; do sleep 0.05; done
}
record() { echo "$*" >>"$results"; }
shmem() { awk '/^Shmem:/ { print $2 * 1024 }' /proc/meminfo; }
# sample_memory raises $peak to the daemon's memory plus batch memory now.
sample_memory() {
	local now
	now=$(($(awk '/^(RssAnon|RssFile):/ { s += $2 } END { print s * 1024 }' "/proc/$daemon/status") + $(shmem) - shmem0))
	((now > peak)) && peak=$now
	return 0
}

for run in $(seq "$runs"); do
	echo "== run $run of $runs" 

	# 1. One core each, same files, same transform.
	ours=$(cd producer && TSOCK_BENCH_DIR="$work/data" "$work/producer.test" -test.run '^$' \
		-test.bench 'BenchmarkSample/turbo' -test.benchtime "${images}x" -test.cpu 1 |
		awk '/img\/s/ { for (i = 1; i <= NF; i++) if ($(i+1) == "img/s") print $i }')
	theirs=$($py scripts/python/bench_torchvision.py percore "$work/data" 1)
	record percore "$ours" "$theirs"

	# 2. Sharing: N consumers of one pipeline vs N separate loaders.
	for n in 1 2 4; do
		mount_bg --source "$work/data" --batch-size 256 --epochs 2 --buffer 2GiB
		for i in $(seq "$n"); do mkdir "$mnt/consumers/c$i"; done
		pids=()
		for i in $(seq "$n"); do
			$py scripts/python/read_batches.py "$mnt" "c$i" >"$work/c$i.json" &
			pids+=($!)
		done
		for p in "${pids[@]}"; do wait "$p"; done
		unmount
		# Each process's second epoch, whole, as for the loaders; summed.
		shared=$($py -c "import json,sys; print(sum(json.load(open(f))['last_epoch_images_per_s'] for f in sys.argv[1:]))" "$work"/c*.json)
		rm -f "$work"/c*.json
		workers=$((cores / n))
		pids=()
		for i in $(seq "$n"); do
			$py scripts/python/bench_torchvision.py loader "$work/data" "$workers" 256 >"$work/t$i.txt" &
			pids+=($!)
		done
		for p in "${pids[@]}"; do wait "$p"; done
		separate=$(cat "$work"/t*.txt | $py -c "import sys; print(sum(float(x) for x in sys.stdin))")
		rm -f "$work"/t*.txt
		record sharing "$n" "$shared" "$separate"
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
		until grep -q "^state: buffer full" "$mnt/status"; do sample_memory; sleep 0.05; done
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
done

$py - "$results" "$images" "$runs" "$cores" >&3 <<'PY'
import statistics, sys
path, images, runs, cores = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rows = [line.split(maxsplit=5) for line in open(path)]
med = statistics.median
def col(kind, i, key=None):
    return [float(r[i]) for r in rows if r[0] == kind and (key is None or r[1] == key)]
print(f"## tsock benchmark: {images} JPEGs of 300-600 px, {cores} cores, medians of {runs} runs\n")
print("| measure | tsock | baseline | ratio |")
print("|---|---|---|---|")
ours, theirs = col("percore", 1), col("percore", 2)
ratios = [a / b for a, b in zip(ours, theirs)]
print(f"| producer, images/s per core (read+decode+crop+resize+flip, uint8) | {med(ours):.0f} | torchvision {med(theirs):.0f} | {med(ratios):.2f}x |")
for n in ("1", "2", "4"):
    s, t = col("sharing", 2, n), col("sharing", 3, n)
    print(f"| {n} consumer(s): images/s delivered, all together | {med(s):.0f} | {n} torchvision DataLoader(s) {med(t):.0f} | {med([a / b for a, b in zip(s, t)]):.2f}x |")
for label, a, b in (("1 reader", 1, 2), ("4 readers", 3, 4)):
    m, s = col("read", a), col("read", b)
    print(f"| read GB/s, {label} | {med(m):.2f} | /dev/shm {med(s):.2f} | {med([x / y for x, y in zip(m, s)]):.2f}x |")
for n in ("1", "8"):
    peak, buf = col("memory", 2, n), col("memory", 3, n)
    print(f"| peak daemon memory + batch memory (Shmem), {n} consumer(s), buffer full | {med(peak) / 2**20:.0f} MiB | --buffer {med(buf) / 2**20:.0f} MiB | {med([p / b for p, b in zip(peak, buf)]):.2f}x |")
paths = {r[5].strip() for r in rows if r[0] == "read" and len(r) > 5}
print(f"\ndata path: {', '.join(sorted(paths))}")
PY
