#!/usr/bin/env bash
# A/B of a change that must cost nothing: the store's round trip
# (BenchmarkStoreRoundTrip: 1, 4 and 200 consumers, ns a batch) and the
# producer in a mount (bench.sh's row 1b: --workers 1, one reader, 3 whole
# epochs over real photographs, images/s from the mount's start to the
# last read), BASE against the working tree, the two sides interleaved in
# each run (BASE first in odd runs, last in even ones), medians of RUNS
# runs with their spread, and each ratio (this tree / BASE) taken within
# one run.
#
#   scripts/bench_ab.sh BASE [RUNS] [IMAGES]     default 3 runs, 1000 images
#
# BASE is a commit; its side runs the working tree's benchmark file
# (store_bench_test.go uses the store's exported calls only).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { sed -n '2,14s/^# \{0,1\}//p' "$0" >&2; exit 2; }
base=$1
runs=${2:-3}
images=${3:-1000}
exec 3>&1 1>&2
TSOCK_SETUP_TORCH=1 scripts/setup.sh
source scripts/lib.sh

git worktree add -q --detach "$work/base" "$base"
trap 'cleanup_ab' EXIT
cleanup_ab() { git worktree remove --force "$work/base" 2>/dev/null || true; cleanup; }
cp batchstore/store_bench_test.go "$work/base/batchstore/"
for side in base new; do
	dir=.
	[[ $side == base ]] && dir="$work/base"
	(cd "$dir" && go build -o "$work/tsock-$side" ./cmd/tsock && go test -c -o "$work/batchstore-$side.test" ./batchstore)
done
scripts/realphotos.sh "$work/photos" "$images" >/dev/null
results="$work/results.txt"
third_epoch() { echo $((images * (3 * 224 * 224 + 16) / 3)); }

side_run() { # side_run SIDE: one measurement of each row, into $results
	local side=$1 began line
	"$work/batchstore-$side.test" -test.run '^$' -test.bench 'BenchmarkStoreRoundTrip' -test.benchtime 20000x -test.count 1 |
		awk -v side="$side" '/^BenchmarkStoreRoundTrip/ { split($1, a, "="); sub(/-[0-9]+$/, "", a[2]); print "store-" a[2], side, $3 }' >>"$results"
	tsock="$work/tsock-$side"
	mount_bg --source "$work/photos" --batch-size 64 --workers 1 --epochs 3 --buffer "$(third_epoch)" >/dev/null
	began=$(date +%s.%N)
	$py scripts/python/read_batches.py "$mnt" w1 --join >"$work/w1.json"
	unmount
	line=$($py -c "import json,sys; r=json.load(open(sys.argv[1])); print(round(r['images'] / (r['ended_at'] - float(sys.argv[2])), 1))" "$work/w1.json" "$began")
	echo "mount $side $line" >>"$results"
}

for run in $(seq "$runs"); do
	echo "== run $run of $runs"
	if ((run % 2)); then order=(base new); else order=(new base); fi
	for side in "${order[@]}"; do side_run "$side"; done
	echo "run $run" >>"$results"
done

$py - "$results" "$base" "$(git rev-parse --short HEAD)" >&3 <<'PY'
import statistics, sys
rows, run, ratios = {}, {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "run":
        for row, sides in run.items():
            if "base" in sides and "new" in sides:
                ratios.setdefault(row, []).append(sides["new"] / sides["base"])
        run = {}
        continue
    row, side, value = f[0], f[1], float(f[2])
    rows.setdefault(row, {}).setdefault(side, []).append(value)
    run.setdefault(row, {})[side] = value
def spread(v): return f"{statistics.median(v):.3g} ({min(v):.3g}-{max(v):.3g})"
print(f"| row | {sys.argv[2]} (base) | {sys.argv[3]} (this tree) | this / base, median (spread) |")
print("|---|---|---|---|")
for row in sorted(rows):
    unit = "images/s" if row == "mount" else "ns a batch"
    r = ratios.get(row, [])
    verdict = "no difference" if r and min(r) <= 1 <= max(r) else ""
    print(f"| {row} ({unit}) | {spread(rows[row]['base'])} | {spread(rows[row]['new'])} | {spread(r)} {verdict} |")
PY
