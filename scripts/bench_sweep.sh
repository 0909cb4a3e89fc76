#!/usr/bin/env bash
# A whole sweep, measured: scripts/examples/optuna_sweep.py (an Optuna
# study, 8 trials in 4 processes, a MedianPruner, validation after every
# epoch) fed by tsock (a training mount and an eval mount) and by each
# trial's own torchvision DataLoaders, one after the other in each run, on
# real photographs; prints a markdown table of its own: the sweep's wall
# time (medians of RUNS runs, min-max of the ratio) and tsock's decodes.
#
#   scripts/bench_sweep.sh [IMAGES] [RUNS]     default 1000 real photographs, 3 runs
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the table alone on standard output
TSOCK_SETUP_TORCH=1 scripts/setup.sh
source scripts/lib.sh

images=${1:-1000}
runs=${2:-3}
build_tsock
scripts/realphotos.sh "$work/photos" "$images" >/dev/null
sweep=(scripts/examples/optuna_sweep.py --data "$work/photos" --images "$images" --trials 8 --workers 4 --epochs 3 --tsock "$tsock")
for run in $(seq "$runs"); do
	echo "== sweep, run $run of $runs"
	"$py" "${sweep[@]}" | tail -1 >>"$work/tsock.jsonl"
	"$py" "${sweep[@]}" --loaders | tail -1 >>"$work/loaders.jsonl"
done
"$py" - "$work/tsock.jsonl" "$work/loaders.jsonl" "$images" "$(nproc)" >&3 <<'PY'
import json, sys
sys.path.insert(0, "scripts/python")
from benchtable import header, med, ratio, spread
ours = [json.loads(l) for l in open(sys.argv[1])]
theirs = [json.loads(l) for l in open(sys.argv[2])]
images, cores = sys.argv[3:5]
theirs_s, ours_s = [b["seconds"] for b in theirs], [a["seconds"] for a in ours]
print(header(f"\n### A sweep: Optuna, 8 trials in 4 processes, 3 epochs with validation, {images} real photos, {cores} cores, medians of {len(ours)} runs"))
print(f"| whole sweep, seconds (lower is better; ratio: how much sooner tsock ends) | {med(ours_s):.1f} | own DataLoaders {med(theirs_s):.1f} | {ratio(theirs_s, ours_s)} |")
tr = [a["decoded"]["train"] for a in ours]
ev = [a["decoded"]["eval"] for a in ours]
print(f"| images decoded, training mount / eval mount (own DataLoaders: {8 * 3 * int(images)} each, fewer with pruning) | {med(tr):.0f} / {med(ev):.0f} | | |")
per = [a["decoded"]["train"] / a["trained"] for a in ours]
print(f"| training decodes per training image delivered (trials that come and go; own DataLoaders: 1) | {med(per):.2f} ({spread(per)}) | | |")
PY
