#!/usr/bin/env bash
# Subsets, measured: prints a markdown table of its own (medians of RUNS
# runs, min-max of each ratio, every ratio within one run, tsock and the
# baseline one after the other in each run).
#
#   scripts/bench_subsets.sh [IMAGES] [RUNS]     default 2000 real photographs, 3 runs
#
# 1. 5-fold cross-validation: 5 consumers, each on "fold k/5", of one
#    mount, against 5 torchvision DataLoaders each over its fold (batch
#    256, workers = cores/5): 2 whole epochs, images delivered all
#    together over the span from the mount's start (or the loaders') to
#    the last read, a buffer of a third of an epoch; and the producer's
#    decodes per epoch against the loaders' (5 x 4/5 of the set).
# 2. 4 consumers on disjoint quarters ("holdout k/4"), where sharing
#    cannot help, against 4 DataLoaders over the same quarters.
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the table alone on standard output
TSOCK_SETUP_TORCH=1 scripts/setup.sh
source scripts/lib.sh

images=${1:-2000}
runs=${2:-3}
cores=$(nproc)
results="$work/results.txt"
build_tsock
scripts/realphotos.sh "$work/photos" "$images" >/dev/null
third_epoch() { echo $((images * (3 * 224 * 224 + 16) / 3)); }

# parts N FORM: N consumers of one mount, consumer k on "FORM k/N", then
# N DataLoaders on the same parts; records tsock's and their images/s and
# the producer's decodes per epoch.
parts() {
	local n=$1 form=$2 began pids=() shared decoded separate
	rm -f "$work"/c*.json "$work"/t*.json
	mount_bg --source "$work/photos" --batch-size 64 --epochs 2 --buffer "$(third_epoch)"
	began=$(date +%s.%N)
	for k in $(seq "$n"); do
		mkdir "$mnt/consumers/c$k"
		echo "$form $k/$n" >"$mnt/consumers/c$k/subset"
	done
	for k in $(seq "$n"); do
		"$py" scripts/python/read_batches.py "$mnt" "c$k" >"$work/c$k.json" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	decoded=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["producer"]["samples"] / 2)' "$mnt/status.json")
	unmount
	shared=$("$py" -c "import json,sys; r=[json.load(open(f)) for f in sys.argv[2:]]; print(round(sum(x['images'] for x in r) / (max(x['ended_at'] for x in r) - float(sys.argv[1])), 1))" "$began" "$work"/c*.json)
	pids=()
	for k in $(seq "$n"); do
		"$py" scripts/python/bench_torchvision.py loader "$work/photos" $((cores / n)) 256 2 "$form $k/$n" >"$work/t$k.json" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	separate=$("$py" -c "import json,sys; r=[json.load(open(f)) for f in sys.argv[1:]]; print(round(sum(x['images'] for x in r) / (max(x['end'] for x in r) - min(x['start'] for x in r)), 1))" "$work"/t*.json)
	loaded=$("$py" -c "import json,sys; print(sum(json.load(open(f))['images'] for f in sys.argv[1:]) / 2)" "$work"/t*.json)
	echo "$form$n $shared $separate $decoded $loaded" >>"$results"
}

for run in $(seq "$runs"); do
	echo "== subsets, run $run of $runs"
	parts 5 fold
	parts 4 holdout
done
"$py" - "$results" "$images" "$cores" >&3 <<'PY'
import sys
sys.path.insert(0, "scripts/python")
from benchtable import header, med, ratio
path, images, cores = sys.argv[1:4]
rows = [line.split() for line in open(path)]
def col(kind, i):
    return [float(r[i]) for r in rows if r[0] == kind]
print(header(f"\n### Subsets: {images} real photos, {cores} cores, medians of {len(col('fold5', 1))} runs (min-max of each ratio)"))
for kind, label in (("fold5", "5-fold CV, 5 consumers on fold k/5"), ("holdout4", "4 consumers on disjoint quarters (holdout k/4)")):
    s, t = col(kind, 1), col(kind, 2)
    print(f"| {label}: images/s delivered all together, 2 whole epochs | {med(s):.0f} | {kind[-1]} DataLoaders {med(t):.0f} | {ratio(s, t)} |")
    d, l = col(kind, 3), col(kind, 4)
    print(f"| {label}: images decoded per epoch | {med(d):.0f} | {kind[-1]} DataLoaders {med(l):.0f} | {ratio(d, l)} |")
PY
