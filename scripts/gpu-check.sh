#!/usr/bin/env bash
# For a machine with an NVIDIA GPU: checks tsock's GPU path end to end on
# the real driver (scripts/python/gpu_check.py holds the consumer sides).
#
#   1. gpu/devices shows NVML's view of the device.
#   2. Two consumer processes map every batch's tensors through CUDA IPC
#      and compare them on the GPU with the same batch's .safetensors: one
#      at the producer's batch size (zero copy), one at its own (tensors
#      that span two slabs, joined on the GPU).
#   3. A consumer that holds every slab is SIGKILLed: the slabs come back,
#      and while it lived, status showed its GPU memory from NVML.
#   4. A batch dropped while a queued kernel still reads it is released only
#      after the kernel: the copy it made is its own batch's bytes. The
#      same run without the wait must fail, or the check proves nothing.
#
#   scripts/gpu-check.sh [DEVICE]    default cuda:0
#
# TSOCK=/path/to/tsock uses that binary (a machine without Go: build it
# elsewhere); PY names the Python with CuPy and PyTorch (default: the first
# of python3 and /usr/bin/python3 that imports both).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
# The client from the checkout: the Python with CuPy is not setup.sh's venv.
export PYTHONPATH="$PWD/scripts/python${PYTHONPATH:+:$PYTHONPATH}"
device=${1:-cuda:0}
if [[ -n "${TSOCK:-}" ]]; then
	tsock=$TSOCK
else
	scripts/setup.sh
	build_tsock
fi
if [[ -z "${PY:-}" ]]; then
	for PY in python3 /usr/bin/python3 ""; do
		[[ -n "$PY" ]] && "$PY" -c "import cupy, torch" 2>/dev/null && break
	done
fi
[[ -n "$PY" ]] && "$PY" -c "import cupy; cupy.cuda.runtime.getDeviceCount()" ||
	{ echo "gpu-check: needs a Python with CuPy, PyTorch and a working CUDA driver (set PY)" >&2; exit 1; }
check=scripts/python/gpu_check.py
fail() { echo "gpu-check: FAILED: $*" >&2; exit 1; }
metric() { awk -v m="$1" '$1 == m { print $2 }' "$mnt/metrics"; }

"$tsock" gendata "$work/data" --images 300 --classes 3 >/dev/null
"$tsock" gendata "$work/four" --images 128 --classes 2 >/dev/null # 4 batches of 32

echo "== 1, 2: NVML; every tensor on the GPU equals its file"
mount_bg --source "$work/data" --batch-size 32 --image-size 64 --epochs 1 --buffer 512MiB --device "$device"
cat "$mnt/gpu/devices"
grep -q "memory=" "$mnt/gpu/devices" || fail "gpu/devices has no NVML values"
handles=$(cut -d' ' -f2 "$mnt/gpu/slabs" | sort -u | wc -l)
((handles == 1)) || fail "$(wc -l <"$mnt/gpu/slabs") slabs under $handles IPC handles: want one allocation, one handle"
"$PY" $check compare "$mnt" a 32 &
first=$!
"$PY" $check compare "$mnt" b 20 &
second=$!
wait "$first" || fail "consumer a (producer's batch size)"
wait "$second" || fail "consumer b (batch size 20)"
grep -E '^gpu' -A4 "$mnt/status"
unmount

echo "== 3: a consumer SIGKILLed while it holds every slab gives them back"
slab=$((32 * 3 * 64 * 64 + 2 * 32 * 8)) # one batch: images, labels, indices
mount_bg --source "$work/four" --batch-size 32 --image-size 64 --epochs 1 --buffer 512MiB \
	--device "$device" --gpu-buffer $((4 * slab))
(($(wc -l <"$mnt/gpu/slabs") == 4)) || fail "want 4 slabs, have $(wc -l <"$mnt/gpu/slabs")"
"$PY" $check hold "$mnt" victim 4 >"$work/victim.out" &
victim=$!
until grep -q holding "$work/victim.out"; do
	kill -0 "$victim" 2>/dev/null || fail "the victim died before holding its batches"
	sleep 0.1
done
(($(metric tsock_gpu_slabs_in_use) == 4)) || fail "victim holds 4 batches, $(metric tsock_gpu_slabs_in_use) slabs in use"
grep -A3 "^gpu memory by consumer" "$mnt/status"
grep -qE "^  victim: pid $victim, [0-9.]+ [KMG]iB" "$mnt/status" || fail "status shows no NVML memory for the victim (pid $victim)"
kill -KILL "$victim"
rc=0
wait "$victim" || rc=$?
((rc == 137)) || fail "the victim exited $rc, not by SIGKILL"
for _ in $(seq 200); do
	(($(metric tsock_gpu_slabs_in_use) == 0)) && break
	sleep 0.05
done
(($(metric tsock_gpu_slabs_in_use) == 0)) || fail "$(metric tsock_gpu_slabs_in_use) slabs still in use 10 s after the victim was killed"
echo "victim (pid $victim) killed holding 4 slabs: all 4 came back"
unmount

echo "== 4: a batch is released only after the kernels that read it"
release() { # release [nosync]: the check, on a mount of its own with 2 slabs
	mount_bg --source "$work/four" --batch-size 32 --image-size 64 --epochs 1 --buffer 512MiB \
		--device "$device" --gpu-buffer $((2 * slab)) >/dev/null
	local rc=0
	TSOCK_GPU_CHECK_NOSYNC=${1:-} "$PY" $check release "$mnt" || rc=$?
	unmount
	return $rc
}
release || fail "a kernel read the next batch's bytes"
if release nosync 2>"$work/nosync.err"; then
	echo "gpu-check: WARNING: without the wait the race did not show on this run: check 4 proved nothing" >&2
else
	echo "without the wait it fails, as it must: $(tail -1 "$work/nosync.err")"
fi
echo "gpu-check: OK"
