#!/usr/bin/env bash
# Several nodes on one machine: three tsock mounts stand for three nodes,
# each serving its own trial, all reading the same WebDataset shards from
# one S3 server (versitygw on loopback, as the tests run it). Prints, per
# node, the bytes each read from the server in its first epoch and in
# each later epoch, without and with --cache, from status.json's
# remote.bytes. A run of 1 epoch gives the first epoch's bytes; a run of
# 3 epochs gives the later ones ((3 epochs - 1 epoch) / 2).
#
#   scripts/multinode.sh [IMAGES] [MODES]   default 600 real photographs, every mode
#
# Four settings: --shard-memory 16MiB (the dataset larger than it holds,
# as ImageNet is for the default: each later epoch reads the shards once,
# less the first ones it keeps across the epoch's end), the default
# 512MiB (this small dataset fits half of it: read once, held), 16MiB
# with --cache 1GiB, each node indexing the shards at its mount
# (--shard-index none); then 16MiB with a --shard-index file that an
# earlier mount wrote, as on a file system every node sees; and 16MiB
# with --node K/3 (node-share): the three mounts as the nodes of one
# trial whose ranks span them, each making only its share of each epoch.
# What it shows: each node reads the dataset from the store once per
# epoch without --cache, and once in all with it (later epochs: 0 bytes);
# nodes do not coordinate, so the store serves N nodes N times the
# dataset in the first epoch (a sweep across nodes pays that, and no
# more, with --cache); the nodes of one trial (--node) read about a
# third each, every epoch.
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the table alone on standard output
TSOCK_SETUP_S3=1 scripts/setup.sh
source scripts/lib.sh

images=${1:-600}
modes=${2:-streaming default cache shared-index node-share}
nodes=3
build_tsock
scripts/realphotos.sh "$work/photos" "$images" >/dev/null
# WebDataset shards of 100: KEY.jpg and KEY.cls, labels from the class folders.
mkdir -p "$work/s3/data/shards"
"$py" - "$work/photos" "$work/s3/data/shards" <<'PY'
import io, os, sys, tarfile
src, out = sys.argv[1:3]
classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
files = [(c, os.path.join(src, c, f)) for c in classes for f in sorted(os.listdir(os.path.join(src, c)))]
for s in range(0, len(files), 100):
    with tarfile.open(os.path.join(out, f"train-{s // 100:06d}.tar"), "w") as tar:
        for i, (c, path) in enumerate(files[s:s + 100], start=s):
            tar.add(path, arcname=f"{i:08d}.jpg")
            label = f"{classes.index(c)}\n".encode()
            info = tarfile.TarInfo(f"{i:08d}.cls")
            info.size = len(label)
            tar.addfile(info, io.BytesIO(label))
PY
shards=$(ls "$work/s3/data/shards" | wc -l)
spec="s3://data/shards/train-{000000..$(printf %06d $((shards - 1)))}.tar"

export AWS_ACCESS_KEY_ID=multinode-key AWS_SECRET_ACCESS_KEY=multinode-secret AWS_REGION=us-east-1
port=$((20000 + RANDOM % 20000))
/var/cache/tsock/gobin/versitygw-posix --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" \
	--port "127.0.0.1:$port" posix "$work/s3" >"$work/versitygw.log" 2>&1 &
server=$!
daemons=()
stop_all() {
	for d in "${daemons[@]}"; do kill -TERM "$d" 2>/dev/null && wait "$d" || true; done
	daemons=()
	for n in $(seq "$nodes"); do mountpoint -q "$work/node$n" 2>/dev/null && umount -l "$work/node$n"; done
	return 0
}
trap 'stop_all; kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; cleanup' EXIT
until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do sleep 0.1; done

# run EPOCHS CACHEFLAGS…: the three nodes at once, one trial each reading
# every batch; prints each node's remote.bytes.
run() {
	local epochs=$1
	shift
	for n in $(seq "$nodes"); do
		mkdir -p "$work/node$n"
		# --node-share: this node's --node K/N.
		"$tsock" mount "$work/node$n" --source "$spec" --s3-endpoint "http://127.0.0.1:$port" \
			--epochs "$epochs" --batch-size 64 --image-size 64 --buffer 64MiB --shard-index none "${@/#--node-share/--node=$((n - 1))/$nodes}" >"$work/node$n.log" 2>&1 &
		daemons+=($!)
	done
	for n in $(seq "$nodes"); do
		until [[ -e "$work/node$n/status" ]]; do sleep 0.05; done
	done
	local pids=()
	for n in $(seq "$nodes"); do
		"$py" scripts/python/read_batches.py "$work/node$n" trial --join >/dev/null &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	for n in $(seq "$nodes"); do
		"$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["remote"]["bytes"])' "$work/node$n/status.json"
	done
	stop_all
}

dataset=$(du -cb "$work/s3/data/shards"/*.tar | tail -1 | cut -f1)
echo "| node | --shard-memory | --cache | shards' index | bytes from the store, first epoch (index at mount included) | each later epoch |" >&3
echo "|---|---|---|---|---|---|" >&3
for mode in $modes; do
	index="made at mount"
	case $mode in
	streaming) flags=(--shard-memory 16MiB) memory=16MiB cache=off ;;
	default) flags=() memory=512MiB cache=off ;;
	cache) flags=(--shard-memory 16MiB --cache 1GiB) memory=16MiB cache=1GiB ;;
	shared-index)
		flags=(--shard-memory 16MiB --shard-index "$work/shared.idx") memory=16MiB cache=off index="a shared file"
		nodes=1 run 1 "${flags[@]}" >/dev/null # the earlier mount that writes it
		;;
	node-share) flags=(--shard-memory 16MiB --node-share) memory=16MiB cache=off index="made at mount, --node K/$nodes" ;;
	esac
	echo "== $nodes nodes, ${flags[*]}: 1 epoch, then 3"
	mapfile -t one < <(run 1 "${flags[@]}")
	mapfile -t three < <(run 3 "${flags[@]}")
	for n in $(seq 0 $((nodes - 1))); do
		later=$(((three[n] - one[n]) / 2))
		printf '| %d | %s | %s | %s | %s (%.2fx the shards) | %s (%.2fx) |\n' $((n + 1)) "$memory" "$cache" "$index" \
			"$(numfmt --to=iec-i --suffix=B "${one[n]}")" "$(awk -v a="${one[n]}" -v b="$dataset" 'BEGIN { print a / b }')" \
			"$(numfmt --to=iec-i --suffix=B "$later")" "$(awk -v a="$later" -v b="$dataset" 'BEGIN { print a / b }')" >&3
	done
done
echo "" >&3
echo "Shards: $shards of 100 real photographs, $(numfmt --to=iec-i --suffix=B "$dataset") in all; $nodes mounts on one machine, one versitygw." >&3
