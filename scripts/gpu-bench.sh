#!/usr/bin/env bash
# For a machine with an NVIDIA GPU and many cores: tsock's GPU rows, as a
# markdown table of medians of RUNS runs (the spread beside each), every
# ratio taken within one run, the two sides alternating which goes first.
#
#   scripts/gpu-bench.sh [IMAGES] [RUNS]     default 4000 images, 3 runs
#
# 1. upload: GB/s of one batch's host→device copy from the batch file's
#    memory (pageable), through page-locked staging, registered, and from
#    page-locked memory (the link's limit): BenchmarkUpload in ./gpu
# 2. the producer on all cores: images/s with --workers 1, 2, 4, … (one
#    reader touching every byte; whole runs from the mount's start, epochs
#    = workers so that each point runs long enough), and torchvision's
#    images/s on one core, same files
# 3. training on the GPU (scripts/examples/train_torch.py, ResNet-18, bf16,
#    224 px, batch 256): one trial through tsock's GPU batches (--via
#    cuda), through the batch files (--via host), and through its own
#    DataLoader (all cores); then 4 trials on one mount vs 4 DataLoaders
#    of cores/4 workers: aggregate images/s from the launch of everything
#    (the mount included) to the last trial's end
#
# TSOCK, GPU_TEST (the gpu package's test binary: go test -c ./gpu) and PY
# as in gpu-check.sh: for a machine without Go. ONLY="upload scale train"
# (default all) picks sections.
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the table alone on standard output; progress on standard error
source scripts/lib.sh
# The client from the checkout: the Python with CuPy is not setup.sh's venv.
export PYTHONPATH="$PWD/scripts/python${PYTHONPATH:+:$PYTHONPATH}"
images=${1:-4000}
runs=${2:-3}
cores=$(nproc)
if [[ -n "${TSOCK:-}" ]]; then
	tsock=$TSOCK
else
	TSOCK_SETUP_TORCH=1 scripts/setup.sh
	build_tsock
fi
if [[ -z "${GPU_TEST:-}" ]]; then
	GPU_TEST="$work/gpu.test"
	go test -c -o "$GPU_TEST" ./gpu
fi
PY=${PY:-python3}
"$PY" -c "import torch, torchvision, cupy; assert torch.cuda.is_available()" ||
	{ echo "gpu-bench: needs $PY with PyTorch, torchvision, CuPy and a GPU (set PY)" >&2; exit 1; }
results="$work/results.txt"
record() { echo "$*" >>"$results"; }
now() { date +%s.%N; }
train=scripts/examples/train_torch.py
epochs=10 # each trial trains long enough that its start-up is a small part
only=" ${ONLY:-upload scale train} "
section() { [[ "$only" == *" $1 "* ]]; }

"$tsock" gendata "$work/data" --images "$images" --classes 10 --min-side 300 --max-side 600 
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader | sed 's/^/gpu: /'

# 1. Upload, interleaved inside the benchmark.
touch "$work/upload.txt"
if section upload; then
	"$GPU_TEST" -test.run '^$' -test.bench BenchmarkUpload -test.benchtime 20x -test.count "$runs" | tee "$work/upload.txt"
fi
{ grep '^BenchmarkUpload' "$work/upload.txt" || true; } | while read -r line; do
	record upload $(echo "$line" | awk '{ for (i = 1; i <= NF; i++) if ($(i+1) ~ /-GB\/s$/) printf "%s=%s ", $(i+1), $i }')
done

# images_of FILE…: the images every JSON line reports, summed.
images_of() { "$PY" -c "import json,sys; print(sum(json.load(open(f))['images'] for f in sys.argv[1:]))" "$@"; }
rate() { "$PY" -c "print(round($1 / ($3 - $2), 1))"; }

# tsock_trials N VIA: N trials on one mount with the GPU; prints their
# aggregate images/s from before the mount to the last one's end.
tsock_trials() {
	local n=$1 via=$2 t0 t1 pids=() device=()
	[[ "$via" == cuda ]] && device=(--device cuda:0)
	t0=$(now)
	mount_bg --source "$work/data" --batch-size 256 --image-size 224 --epochs "$epochs" --buffer 1GiB "${device[@]}" >/dev/null
	for i in $(seq "$n"); do
		"$PY" $train --mount "$mnt" --name "t$i" --device cuda --via "$via" --epochs "$epochs" >"$work/t$i.json" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	t1=$(now)
	unmount
	cat "$work"/t*.json >&2
	rate "$(images_of "$work"/t*.json)" "$t0" "$t1"
	rm -f "$work"/t*.json
}
# loader_trials N WORKERS: N trials, each with its own DataLoader.
loader_trials() {
	local n=$1 workers=$2 t0 t1 pids=()
	t0=$(now)
	for i in $(seq "$n"); do
		"$PY" $train --folder "$work/data" --device cuda --image-size 224 --batch-size 256 --workers "$workers" \
			--epochs "$epochs" >"$work/l$i.json" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	t1=$(now)
	cat "$work"/l*.json >&2
	rate "$(images_of "$work"/l*.json)" "$t0" "$t1"
	rm -f "$work"/l*.json
}

for run in $(seq "$runs"); do
	echo "== run $run of $runs"
	# 2. Scaling: the producer alone, fed to one reader.
	for w in 1 2 4 8 16 32 64; do
		section scale && ((w <= cores)) || break
		t0=$(now)
		mount_bg --source "$work/data" --batch-size 256 --image-size 224 --epochs "$w" --workers "$w" --buffer 1GiB >/dev/null
		"$PY" scripts/python/read_batches.py "$mnt" p --join >"$work/p.json"
		t1=$(now)
		unmount
		# The share of the run the reader waited for the producer: near 1, the producer sets the pace.
		record scale "$w" "$(rate "$(images_of "$work/p.json")" "$t0" "$t1")" \
			"$("$PY" -c "import json; r = json.load(open('$work/p.json')); print(round(r['waiting_seconds'] / r['seconds'], 2))")"
	done
	if section scale; then record percore "$("$PY" scripts/python/bench_torchvision.py percore "$work/data" 1)"; fi

	# 3. One trial, three ways, in a rotating order; then 4 trials each way.
	section train || continue
	ways=(cuda host loader)
	for k in 0 1 2; do
		way=${ways[$(((run + k) % 3))]}
		case $way in
		loader) record train1 loader "$(loader_trials 1 "$cores")" ;;
		*) record train1 "$way" "$(tsock_trials 1 "$way")" ;;
		esac
	done
	if ((run % 2)); then
		shared=$(tsock_trials 4 cuda)
		own=$(loader_trials 4 $((cores / 4)))
	else
		own=$(loader_trials 4 $((cores / 4)))
		shared=$(tsock_trials 4 cuda)
	fi
	record train4 "$shared" "$own"
	echo "-- so far:"
	cat "$results"
done

"$PY" - "$results" "$cores" "$runs" >&3 <<'PY'
import collections, sys
sys.path.insert(0, "scripts/python")
from benchtable import header, med, ratios, spread
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    kind, *vals = line.split()
    rows[kind].append(vals)
cores, runs = sys.argv[2], sys.argv[3]
print(header(f"GPU rows: medians of {runs} runs (spread: min-max), {cores} cores", ("measure", "median", "spread")))
up = collections.defaultdict(list)
for vals in rows["upload"]:
    for kv in vals:
        k, v = kv.split("=")
        up[k].append(float(v))
for k, xs in sorted(up.items()):
    print(f"| upload {k} | {med(xs):.2f} | {spread(xs, 'g')} |")
tv = [float(v[0]) for v in rows["percore"]]
if tv:
    print(f"| torchvision images/s on 1 core | {med(tv):.0f} | {spread(tv, 'g')} |")
by, waits = collections.defaultdict(list), collections.defaultdict(list)
for w, r, waited in rows["scale"]:
    by[int(w)].append(float(r))
    waits[int(w)].append(float(waited))
for w in sorted(by):
    xs = by[w]
    per = med([x / w for x in xs])
    vs = f"; {per / med(tv):.2f}×" if tv else "; -"
    print(f"| tsock --workers {w}: images/s (per worker; × torchvision per core; reader waiting) | "
          f"{med(xs):.0f} ({per:.0f}{vs}; {med(waits[w]):.0%}) | {spread(xs, 'g')} |")
t1 = collections.defaultdict(list)
for way, r in rows["train1"]:
    t1[way].append(float(r))
for way in ("cuda", "host", "loader"):
    if t1[way]:
        print(f"| 1 trial, ResNet-18 on the GPU, via {way}: images/s | {med(t1[way]):.0f} | {spread(t1[way], 'g')} |")
if rows["train4"]:
    sh = [float(a) for a, b in rows["train4"]]
    own = [float(b) for a, b in rows["train4"]]
    ratio = ratios(sh, own)
    print(f"| 4 trials on one mount (--via cuda): aggregate images/s | {med(sh):.0f} | {spread(sh, 'g')} |")
    print(f"| 4 trials, own DataLoaders ({int(cores)//4} workers each): aggregate images/s | {med(own):.0f} | {spread(own, 'g')} |")
    print(f"| ratio, within each run | {med(ratio):.2f}× | {spread(ratio)} |")
PY
