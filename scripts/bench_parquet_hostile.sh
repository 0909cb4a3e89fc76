#!/usr/bin/env bash
# Hostile Parquet, measured as a daemon lives it: the peak memory (VmHWM)
# of `tsock mount` over the hostile suite (BenchmarkWriteHostileParquet:
# a footer claiming a terabyte for a chunk, a footer of 500,000 empty row
# groups, zstd pages of 1 GiB of zeros whose headers say 1000 bytes or
# 1 GiB, a page whose levels are a run of 2^30) beside a good file,
# against the good file alone, both at --buffer 4MiB --shard-memory
# 64MiB, one epoch read whole by a consumer. Prints markdown table rows
# (medians of RUNS runs, min-max). What the daemon may take: the buffer,
# the shard memory, and its own few tens of MiB.
#
#   scripts/bench_parquet_hostile.sh [RUNS]     default 3
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the rows alone on standard output
TSOCK_SETUP_TORCH=1 scripts/setup.sh
source scripts/lib.sh
build_tsock
runs=${1:-3}
suite="$work/suite"
mkdir -p "$suite" "$work/good"
(cd producer/source && TSOCK_HOSTILE_OUT="$suite" go test -run '^$' -bench '^BenchmarkWriteHostileParquet$' -benchtime 1x . >/dev/null)
cp "$suite/a-good.parquet" "$work/good/"

# peak SPEC: one epoch of SPEC read whole; prints the daemon's VmHWM in
# KiB, the batches read and the samples skipped.
peak() {
	mount_bg --source "$1" --buffer 4MiB --shard-memory 64MiB --batch-size 2 --image-size 32 --epochs 1 --max-skipped 100% >/dev/null
	local batches
	batches=$($py - "$mnt" <<'PY'
import os, sys
d = os.path.join(sys.argv[1], "consumers", "r")
os.mkdir(d)
i = 0
while True:
    try:
        with open(os.path.join(d, "%06d.safetensors" % i), "rb") as f:
            f.read()
    except OSError:
        break
    i += 1
print(i)
PY
)
	local hwm skipped
	hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$daemon/status")
	skipped=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["skipped"])' "$mnt/status.json")
	unmount
	echo "$hwm $batches $skipped"
}
: >"$work/rows.txt"
for run in $(seq "$runs"); do
	echo "== hostile Parquet, run $run of $runs"
	echo "good $(peak "$work/good/*.parquet")" >>"$work/rows.txt"
	echo "hostile $(peak "$suite/*.parquet")" >>"$work/rows.txt"
done
"$py" - "$work/rows.txt" >&3 <<'PY'
import sys
sys.path.insert(0, "scripts/python")
from benchtable import header, med, spread
rows = [l.split() for l in open(sys.argv[1])]
good = [r for r in rows if r[0] == "good"]
bad = [r for r in rows if r[0] == "hostile"]
print(header(f"\n### Hostile Parquet: the daemon's peak memory, --buffer 4MiB --shard-memory 64MiB (medians of {len(good)} runs, min-max)"))
for name, rs in (("the good file alone", good), ("the hostile suite beside it", bad)):
    kib = [float(r[1]) for r in rs]
    print(f"| daemon peak RSS (VmHWM), {name}: MiB | {med(kib) / 1024:.0f} ({spread([k / 1024 for k in kib], '.0f')}) | batches {rs[0][2]}, skipped {rs[0][3]} | |")
PY
