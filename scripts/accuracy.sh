#!/usr/bin/env bash
# Does a trial learn from tsock as well as from its own DataLoader? Trains
# the same small CNN (BatchNorm) with the same hyper-parameters and seeds
# on real photographs (scripts/realphotos.sh's crops of Debian's wallpaper
# photos: 20 classes, a photo each; validation on other crops; 64 px)
# three ways: torchvision's ImageFolder
# DataLoader, a tsock mount of the same folder, and a tsock mount of the
# same photos as tar shards written class by class (one class a shard, as
# a conversion straight from a class-sorted folder writes them), with a
# shard memory of 4.65 shards (ImageNet's ratio: 512 MiB of 110 MB
# shards), and as Parquet files of the Hub's layout written the same way
# (a class a file, row groups of 10) in a shard memory of 4.65 files.
# Each mount's order is also measured through the mount against a uniform
# shuffle (scripts/python/mixstats.py: distinct labels a batch, labels
# shared by consecutive batches, a label's spread over the epoch). Prints each run's validation accuracy and a table: mean
# (min-max) over the seeds, and each side's difference from the
# DataLoader's, seed by seed. Then the same for a data-parallel trial of
# 2 and of 4 ranks: DistributedSampler against a mount's group.
#
#   scripts/accuracy.sh [TRAIN_IMAGES] [SEEDS] [EPOCHS] [OPTIMIZER]   default 600, 5, 6, sgd
#
# TSOCK_ACCURACY_PARTS: one (the single-process trainings), ddp (the
# data-parallel ones), or both (default "one,ddp"); TSOCK_ACCURACY_WORLDS:
# the data-parallel trials' rank counts (default "2 4").
#
# OPTIMIZER: sgd (momentum 0.9: the more sensitive to the order) or adamw.
set -euo pipefail
cd "$(dirname "$0")/.."
images=${1:-600}
seeds=${2:-5}
epochs=${3:-6}
optimizer=${4:-sgd}
classes=20
TSOCK_SETUP_TORCH=1 scripts/setup.sh
work=$(mktemp -d /tmp/tsock-accuracy.XXXXXX)
trap 'rm -rf "$work"' EXIT
export PATH="$PATH:/usr/local/go/bin"
CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations" go build -o "$work/tsock" ./cmd/tsock
scripts/realphotos.sh "$work/probe" 1 >/dev/null # fetches the wallpaper photos into its cache
rm -rf "$work/probe"
# A class a photo: CLASSES photos spread over the set, each cut into
# crops (train and validation drawn apart, with other seeds).
mkdir "$work/src"
/usr/bin/python3 - "$work/src" "$classes" "${TSOCK_CACHE:-/var/cache/tsock}/wallpapers" <<'PY'
import os, sys
sys.path.insert(0, "scripts/python")
from realphotos import photos
out, k, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ps = photos([cache])
for c in range(k):
    os.symlink(ps[c * len(ps) // k], os.path.join(out, "%02d.jpg" % c))
PY
/usr/bin/python3 scripts/python/realphotos.py "$work/train" "$work/src" --images "$images" --classes "$classes" --seed 1 >/dev/null
/usr/bin/python3 scripts/python/realphotos.py "$work/val" "$work/src" --images $((images / 3)) --classes "$classes" --seed 2 >/dev/null
# One shard a class, in class order: KEY.jpg and KEY.cls.
/usr/bin/python3 - "$work/train" "$work/shards" <<'PY'
import io, os, sys, tarfile
src, out = sys.argv[1], sys.argv[2]
os.makedirs(out)
for label, cls in enumerate(sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))):
    with tarfile.open(os.path.join(out, f"shard-{label:03d}.tar"), "w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(os.listdir(os.path.join(src, cls))):
            key = f"{cls}-{os.path.splitext(name)[0]}"
            tar.add(os.path.join(src, cls, name), arcname=key + ".jpg")
            data = str(label).encode()
            info = tarfile.TarInfo(key + ".cls")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
PY
shards=$(ls "$work/shards" | wc -l)
bytes=$(du -cb "$work/shards"/*.tar | tail -1 | cut -f1)
memory=$((bytes * 465 / 100 / shards))
# The same, as Parquet: a class a file (the folder's order), row groups of 10.
mkdir "$work/parquet"
(cd producer/source && TSOCK_PARQUET_FROM="$work/train" TSOCK_PARQUET_OUT="$work/parquet" TSOCK_PARQUET_FILES=$classes TSOCK_PARQUET_ROWS=10 \
	CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations" go test -run '^$' -bench '^BenchmarkWriteParquetFromFolder$' -benchtime 1x . >/dev/null)
pbytes=$(du -cb "$work/parquet"/*.parquet | tail -1 | cut -f1)
pmemory=$((pbytes * 465 / 100 / classes))
pspec="$work/parquet/train-{00000..$(printf %05d $((classes - 1)))}.parquet"
spec="$work/shards/shard-{000..$(printf %03d $((shards - 1)))}.tar"
echo "accuracy: $images photos of $classes classes (val $((images / 3))), $shards class-sorted shards, --shard-memory $memory (4.65 shards), $classes class-sorted Parquet files, --shard-memory $pmemory (4.65 files), $seeds seeds, $epochs epochs, $optimizer"
parts=",${TSOCK_ACCURACY_PARTS:-one,ddp},"
if [[ $parts == *,one,* ]]; then
# How each order mixes, through a mount, at the batch size trained with.
for source in "$work/train" "$spec" "$pspec"; do
	mem=()
	[[ $source == "$spec" ]] && mem=(--shard-memory "$memory")
	[[ $source == "$pspec" ]] && mem=(--shard-memory "$pmemory")
	mnt=$(mktemp -d "$work/mnt.XXXXXX")
	"$work/tsock" mount "$mnt" --source "$source" "${mem[@]}" --batch-size 32 --epochs 2 --image-size 16 >/dev/null 2>"$work/mix.log" &
	pid=$!
	for _ in $(seq 200); do [[ -e "$mnt/status" ]] && break; sleep 0.05; done
	echo "mix of $(basename "$source"): $(/usr/bin/python3 scripts/python/mixstats.py "$mnt" --epochs 2 | tr '\n' ' ')"
	kill -TERM "$pid"
	wait "$pid" || true
done
/usr/bin/python3 scripts/python/accuracy.py --train "$work/train" --val "$work/val" \
	--shards "$spec" --shard-memory "$memory" --parquet "$pspec" --parquet-memory "$pmemory" \
	--sides dataloader,folder,shards,parquet --seeds "$seeds" --epochs "$epochs" --optimizer "$optimizer" --tsock "$work/tsock"
fi
if [[ $parts == *,ddp,* ]]; then
# A data-parallel trial (torch DDP, gloo on CPU) of 2 and of 4 ranks:
# DistributedSampler over the folder against one mount whose ranks join
# as a group, paired over the same seeds (scripts/python/ddp_accuracy.py;
# each run also checks every epoch was dealt exactly, equal steps a rank).
for world in ${TSOCK_ACCURACY_WORLDS:-2 4}; do
	/usr/bin/python3 scripts/python/ddp_accuracy.py --train "$work/train" --val "$work/val" --world "$world" \
		--seeds "$seeds" --epochs "$epochs" --image-size 64 --batch-size $((32 / world)) --tsock "$work/tsock"
done
fi
