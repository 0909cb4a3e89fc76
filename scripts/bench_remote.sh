#!/usr/bin/env bash
# Data in object storage, measured: prints markdown table rows (medians
# of RUNS runs, min-max of each ratio, every ratio within one run).
#
#   scripts/bench_remote.sh [IMAGES] [RUNS]     default 2000 real photographs, 3 runs
#
# It prints a table of its own (scripts/bench.sh prints it after its own).
# 1. The producer's images/s over whole epochs (224 px, batches of 64,
#    every core, a buffer of 3 batches): the photos as a local folder,
#    then as WebDataset shards of 100 in versitygw on loopback (--fetch
#    64), then the same with --cache; the first epoch and the two later
#    ones separately, the three one after the other in each run.
# 2. The same shards behind a proxy that holds every answer back by a
#    first-byte delay of 0, 30 and 100 ms (a cloud store answers a GET in
#    20-100 ms): shards read whole (the default), a ranged GET per sample
#    (--shard-memory 0, --fetch 64) and whole shards with --cache, against
#    the local folder measured in the same run with the server idle
#    beside it; images/s of the first epoch and of the two later ones,
#    requests and bytes per epoch against the shards' count and bytes;
#    and the same photos as Parquet files in the Hub's layout (row groups
#    of 100), against their row groups and image chunks' bytes, in 12 row
#    groups' memory and in none (a row group read whole the first time a
#    row of it is read alone, then each row as its own page).
# 3. A mount's open over 100,000 keys in versitygw on loopback: listing
#    an ImageFolder of 1,000 classes of 100 keys, and indexing 1,000
#    shards of 100 samples.
# 4. The first epoch's fixed cost: the time to the first batch (both
#    sides), and 2. at 100 ms for whole shards again on BIG photos
#    (default 3x IMAGES): the first byte is paid once, so the first
#    epoch's ratio depends on how long an epoch is.
# Loopback has no latency to speak of: these are the costs of tsock's
# side (requests, parsing, copies), not of a network.
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the rows alone on standard output
TSOCK_SETUP_TORCH=1 TSOCK_SETUP_S3=1 scripts/setup.sh
source scripts/lib.sh

images=${1:-2000}
runs=${2:-3}
big=${3:-$((3 * images))}
scripts/realphotos.sh "$work/photos" "$images" >/dev/null
scripts/realphotos.sh "$work/big" "$big" >/dev/null
go test -c -o "$work/source.test" ./producer/source
for run in $(seq "$runs"); do
	echo "== remote, run $run of $runs"
	(cd producer/source && TSOCK_BENCH_DIR="$work/photos" "$work/source.test" -test.run '^$' \
		-test.bench '^BenchmarkRemoteEpochs$' -test.benchtime 1x) | grep '^remote-epochs' >>"$work/results.txt"
	(cd producer/source && TSOCK_BENCH_DIR="$work/photos" "$work/source.test" -test.run '^$' \
		-test.bench '^BenchmarkRemoteLatency$' -test.benchtime 1x) | grep '^remote-latency' >>"$work/results.txt"
	(cd producer/source && "$work/source.test" -test.run '^$' -test.bench '^BenchmarkRemoteOpen$' -test.benchtime 1x) |
		grep '^remote-open' >>"$work/results.txt"
	(cd producer/source && TSOCK_BENCH_DIR="$work/big" TSOCK_BENCH_DELAYS=100 TSOCK_BENCH_MODES=whole "$work/source.test" -test.run '^$' \
		-test.bench '^BenchmarkRemoteLatency$' -test.benchtime 1x) | sed -n 's/^remote-latency /remote-big /p' >>"$work/results.txt"
done
"$py" - "$work/results.txt" "$images" "$(nproc)" "$big" >&3 <<'PY'
import sys
sys.path.insert(0, "scripts/python")
from benchtable import header, med, ratio, spread
path, images, cores, big_images = sys.argv[1:5]
rows = [line.split() for line in open(path)]
ep = [list(map(float, (r[2], r[3], r[5], r[6], r[8], r[9]))) for r in rows if r[0] == "remote-epochs"]
op = [(float(r[2]), float(r[4])) for r in rows if r[0] == "remote-open"]
col = lambda k: [e[k] for e in ep]
print(header(f"\n### Data in object storage: medians of {len(ep)} runs (min-max of each ratio)"))
for label, k in (("first epoch", 0), ("epochs 2-3", 1)):
    print(f"| S3 shards on loopback, producer images/s, {label} ({images} real photos, {cores} cores) | {med(col(2 + k)):.0f} | local folder {med(col(k)):.0f} | {ratio(col(2 + k), col(k))} |")
    print(f"| S3 shards with --cache, producer images/s, {label} | {med(col(4 + k)):.0f} | local folder {med(col(k)):.0f} | {ratio(col(4 + k), col(k))} |")
lat = [r for r in rows if r[0] == "remote-latency"]
for delay in ("0", "30", "100"):
    runs_ = {}
    for r in lat:
        if r[1] == delay:
            runs_.setdefault(r[2], []).append(r)
    folder = runs_.get("folder", [])
    for mode, label in (("whole", "whole shards, shard memory of 12 shards"), ("whole-fits", "whole shards, the dataset within the default shard memory"),
                        ("per-sample", "a ranged GET per sample"), ("whole-cache", "whole shards (12 shards' memory), --cache"),
                        ("whole-indexed", "whole shards (12 shards' memory), --shard-index written by an earlier mount"),
                        ("parquet", "Parquet files (the Hub's layout, row groups of 100), 12 row groups' memory"),
                        ("parquet-alone", "Parquet files (row groups of 100), no shard memory: a row group's chunk the first time, then a row's page")):
        what, unit, units = ("S3 Parquet", "row groups", "image chunks") if mode.startswith("parquet") else ("S3 shards", "shards", "shards")
        rs = runs_.get(mode, [])
        if not rs or len(rs) != len(folder):
            continue
        for k, part in ((3, "first epoch"), (4, "epochs 2-3")):
            got, base = [float(r[k]) for r in rs], [float(r[k]) for r in folder]
            print(f"| {what}, {delay} ms first byte, {label}: images/s, {part} | {med(got):.0f} | local folder {med(base):.0f} | {ratio(got, base)} |")
        req, shards = [float(r[5]) for r in rs], [float(r[7]) for r in rs]
        byt, sbytes = [float(r[6]) for r in rs], [float(r[8]) for r in rs]
        print(f"| {what}, {delay} ms, {label}: requests per epoch | {med(req):.1f} | {med(shards):.0f} {unit} | {ratio(req, shards)} |")
        print(f"| {what}, {delay} ms, {label}: bytes per epoch | {med(byt) / 2**20:.1f} MiB | {units} {med(sbytes) / 2**20:.1f} MiB | {ratio(byt, sbytes)} |")
        first = [float(r[9]) for r in rs]
        whole = [float(r[10]) / 3 + float(r[6]) for r in rs]  # 3 epochs a row
        print(f"| {what}, {delay} ms, {label}: bytes of the index at open and the first epoch (with the second's first shards, read ahead) | {med(first) / 2**20:.1f} MiB | {units} {med(sbytes) / 2**20:.1f} MiB | {ratio(first, sbytes)} |")
        print(f"| {what}, {delay} ms, {label}: bytes per epoch over the run, the index at open included | {med(whole) / 2**20:.1f} MiB | {units} {med(sbytes) / 2**20:.1f} MiB | {ratio(whole, sbytes)} |")
for delay in ("0", "30", "100"):
    folder = [r for r in lat if r[1] == delay and r[2] == "folder"]
    whole = [r for r in lat if r[1] == delay and r[2] == "whole"]
    if folder and len(folder) == len(whole):
        f, w = [float(r[11]) for r in folder], [float(r[11]) for r in whole]
        print(f"| S3 shards, {delay} ms first byte, whole shards (12 shards' memory): ms from the producer's start to the first batch | {med(w):.0f} ({spread(w, '.0f')}) | local folder {med(f):.0f} ({spread(f, '.0f')}) | |")
big = [r for r in rows if r[0] == "remote-big"]
bf, bw = [r for r in big if r[2] == "folder"], [r for r in big if r[2] == "whole"]
if bf and len(bf) == len(bw):
    for k, part in ((3, "first epoch"), (4, "epochs 2-3")):
        got, base = [float(r[k]) for r in bw], [float(r[k]) for r in bf]
        print(f"| S3 shards, 100 ms first byte, whole shards (12 shards' memory), {big_images} real photos: images/s, {part} | {med(got):.0f} | local folder {med(base):.0f} | {ratio(got, base)} |")
lists, indexes = [o[0] for o in op], [o[1] for o in op]
print(f"| open of 100,000 keys in S3: listing an ImageFolder (1,000 classes), seconds | {med(lists):.2f} ({spread(lists)}) | | |")
print(f"| open of 100,000 samples in S3: indexing 1,000 shards of 100, seconds | {med(indexes):.2f} ({spread(indexes)}) | | |")
PY
