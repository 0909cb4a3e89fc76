#!/usr/bin/env bash
# For a machine with an NVIDIA GPU: checks tsock's GPU path end to end on
# the real driver. It mounts a small dataset with --device, runs two
# consumer processes that map every batch's tensors through CUDA IPC
# (CuPy) and compare them byte for byte with the same batch's
# .safetensors, and prints the result. Needs the NVIDIA driver and CuPy
# for /usr/bin/python3 (e.g. Debian's python3-cupy, or pip install cupy-cudaXXx).
#
#   scripts/gpu-check.sh [DEVICE]    default cuda:0
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/lib.sh
device=${1:-cuda:0}
py=/usr/bin/python3
$py -c "import cupy; cupy.cuda.runtime.getDeviceCount()" ||
	{ echo "gpu-check: CuPy with a working CUDA driver is needed for $py" >&2; exit 1; }
build_tsock
"$tsock" gendata "$work/data" --images 300 --classes 3 >/dev/null
mount_bg --source "$work/data" --batch-size 32 --image-size 64 --epochs 1 --buffer 512MiB --device "$device"
cat "$mnt/gpu/devices"
check() { # check NAME BATCH_SIZE: every tensor on the GPU equals the file's
	$py - "$mnt" "$1" "$2" <<'PY'
import os, sys, numpy as np, cupy
sys.path.insert(0, os.path.join(os.getcwd(), "scripts", "python"))
import tsock
mount, name, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
host_dir = os.path.join(mount, "consumers", name + "-host")  # the same batches, from the host files
os.mkdir(host_dir)
with open(os.path.join(host_dir, "batch_size"), "w") as f:
    f.write(f"{size}\n")
n = 0
with tsock.cuda_batches(mount, name=name, batch_size=size) as c:
    for i, b in enumerate(c):
        host = tsock.load_batch(os.path.join(mount, "consumers", name + "-host", "%06d.safetensors" % i))
        for t in ("images", "labels", "indices"):
            got = cupy.asnumpy(cupy.asarray(b[t])).reshape(host[t].shape)
            assert np.array_equal(got, host[t]), f"{name} batch {i}: {t} differ between the GPU and the file"
        n += len(host["labels"])
print(f"{name}: {n} samples, every tensor on the GPU equals its .safetensors")
PY
}
check a 32 & # the producer's batches: one segment per tensor, zero copy
first=$!
check b 20 & # its own batch size: tensors that span two slabs
second=$!
wait "$first"
wait "$second"
echo "-- status:"
grep -E '^gpu' -A4 "$mnt/status"
unmount
echo "gpu-check: OK"
