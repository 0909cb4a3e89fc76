#!/usr/bin/env bash
# The hyper-parameter search tsock is for: four trials with different
# learning rates train at once from one shared tsock pipeline; then the
# same four trials each with its own torchvision DataLoader (workers =
# cores/4). Prints each trial's final loss and each side's aggregate
# images/s (all trials' images over the wall time, start-up included).
#
#   scripts/examples/sweep.sh [IMAGES] [EPOCHS]    default 2000 JPEGs, 1 epoch
set -euo pipefail
cd "$(dirname "$0")/../.."
TSOCK_SETUP_TORCH=1 scripts/setup.sh
source scripts/lib.sh

images=${1:-2000}
epochs=${2:-1}
size=96
lrs=(0.1 0.05 0.02 0.01)
workers=$(($(nproc) / ${#lrs[@]}))

echo "== building tsock, writing $images JPEGs (300-600 px, 10 classes)"
build_tsock
"$tsock" gendata "$work/data" --images "$images" --classes 10 >/dev/null

# trials SIDE ARGS…: the four trials at once; prints the wall seconds.
trials() {
	local side=$1 start pids=()
	shift
	start=$(date +%s.%N)
	for i in "${!lrs[@]}"; do
		$py scripts/examples/train_torch.py "$@" --lr "${lrs[$i]}" --epochs "$epochs" >"$work/$side-$i.json" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	$py -c "print($(date +%s.%N) - $start)"
}

echo "== ${#lrs[@]} trials sharing one tsock mount"
mount_bg --source "$work/data" --batch-size 64 --image-size "$size" --epochs "$epochs" --buffer 1GiB
shared=$(trials tsock --mount "$mnt")
unmount
echo "== the same ${#lrs[@]} trials, each with its own DataLoader ($workers workers)"
separate=$(trials torchvision --folder "$work/data" --image-size "$size" --batch-size 64 --workers "$workers")

$py - "$work" "$shared" "$separate" "$images" "$epochs" "${lrs[@]}" <<'PY'
import json, sys
work, shared, separate, images, epochs, lrs = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6:]
print(f"\n| trial | lr | final loss, tsock | final loss, own DataLoader |\n|---|---|---|---|")
for i, lr in enumerate(lrs):
    a, b = (json.load(open(f"{work}/{side}-{i}.json")) for side in ("tsock", "torchvision"))
    print(f"| {i} | {lr} | {a['last_loss']:.3f} | {b['last_loss']:.3f} |")
total = len(lrs) * images * epochs
print(f"\naggregate: tsock {total / shared:.0f} images/s ({shared:.1f} s), "
      f"own DataLoaders {total / separate:.0f} images/s ({separate:.1f} s): {separate / shared:.2f}x")
PY
