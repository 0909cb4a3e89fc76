#!/usr/bin/env bash
# Data-parallel trials, measured: 4 trials of 2 ranks each (8 reader
# processes, every byte touched, no training) read EPOCHS epochs of real
# photographs from one tsock mount, each trial a group (each epoch dealt
# to its 2 ranks), against the same 4 two-rank trials each rank with its
# own torchvision DataLoader and DistributedSampler over the folder (the
# same crop, flip and 224 px). The sides alternate within each run.
# Prints a markdown table of its own: images a second over all ranks from
# the first start to the last end (medians of RUNS runs, the ratio's
# min-max) and whether every epoch of every trial was dealt exactly
# (every sample once across a trial's ranks, the padding aside, and equal
# counts a rank).
#
#   scripts/bench_ddp.sh [IMAGES] [RUNS] [EPOCHS]   default 1000 real photographs, 3 runs, 2 epochs
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the table alone on standard output
TSOCK_SETUP_TORCH=1 scripts/setup.sh
source scripts/lib.sh

images=${1:-1000}
runs=${2:-3}
epochs=${3:-2}
trials=4 world=2 batch=32
cores=$(nproc)
workers=$((cores / (trials * world)))
build_tsock
scripts/realphotos.sh "$work/photos" "$images" >/dev/null
samples=$(find "$work/photos" -type f | wc -l)
for run in $(seq "$runs"); do
	echo "== DDP trials, run $run of $runs"
	rm -f "$work"/*.json "$work/mount-start"
	# The tsock side's time starts at the mount (its producer starts
	# decoding there, before any reader), the DataLoaders' at their
	# processes' starts.
	date +%s.%N >"$work/mount-start"
	mount_bg --source "$work/photos" --batch-size $((batch * world)) --epochs "$epochs" --buffer 1GiB >/dev/null
	pids=()
	for g in $(seq "$trials"); do
		for r in $(seq 0 $((world - 1))); do
			"$py" scripts/python/bench_ddp.py tsock "$mnt" "trial$g" "$r" "$world" "$batch" >"$work/tsock-$g-$r.json" &
			pids+=($!)
		done
	done
	for p in "${pids[@]}"; do wait "$p"; done
	unmount
	pids=()
	for g in $(seq "$trials"); do
		for r in $(seq 0 $((world - 1))); do
			"$py" scripts/python/bench_ddp.py loader "$work/photos" "$r" "$world" "$batch" "$epochs" "$workers" >"$work/loader-$g-$r.json" &
			pids+=($!)
		done
	done
	for p in "${pids[@]}"; do wait "$p"; done
	"$py" - "$work" "$trials" "$world" "$samples" "$epochs" >>"$work/runs.jsonl" <<'PY'
import json, sys
work, trials, world, samples, epochs = sys.argv[1], *map(int, sys.argv[2:])
out = {}
for side in ("tsock", "loader"):
    ranks = {(g, r): json.load(open(f"{work}/{side}-{g}-{r}.json")) for g in range(1, trials + 1) for r in range(world)}
    start = min(x["start"] for x in ranks.values())
    if side == "tsock":
        start = min(start, float(open(f"{work}/mount-start").read()))
    rate = sum(x["images"] for x in ranks.values()) / (max(x["end"] for x in ranks.values()) - start)
    exact = True
    for g in range(1, trials + 1):
        mine = [ranks[g, r]["epochs"] for r in range(world)]
        exact &= all(len(m) == epochs for m in mine)
        for e in range(epochs):
            union = [i for m in mine for i in m[e]]
            exact &= set(union) == set(range(samples)) and len(union) - samples < world
            exact &= len({len(m[e]) for m in mine}) == 1
    out[side] = {"rate": rate, "exact": exact}
print(json.dumps(out))
PY
	tail -1 "$work/runs.jsonl"
done
"$py" - "$work/runs.jsonl" "$images" "$cores" "$epochs" "$workers" >&3 <<'PY'
import json, sys
sys.path.insert(0, "scripts/python")
from benchtable import header, med, ratio
runs = [json.loads(l) for l in open(sys.argv[1])]
images, cores, epochs, workers = sys.argv[2:]
ours, theirs = [r["tsock"]["rate"] for r in runs], [r["loader"]["rate"] for r in runs]
print(header(f"\n### Data-parallel trials: 4 trials of 2 ranks, {epochs} epochs of {images} real photos, {cores} cores, medians of {len(runs)} runs"))
print(f"| images a second, all 8 ranks (one mount, a group a trial; own: a DataLoader with {workers} workers and DistributedSampler a rank) | {med(ours):.0f} | own DataLoaders {med(theirs):.0f} | {ratio(ours, theirs)} |")
ok = lambda side: f"{sum(r[side]['exact'] for r in runs)} of {len(runs)} runs"
print(f"| every epoch of every trial dealt exactly (each sample once across its ranks, equal counts a rank) | {ok('tsock')} | {ok('loader')} | |")
PY
