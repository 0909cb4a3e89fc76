#!/usr/bin/env bash
# Without root, measured: what a user without root gets against root, on
# the same machine, the two interleaved in each run (medians of RUNS runs,
# min-max of each ratio). Run as root: it makes /dev/fuse openable by all
# for the run (as an administrator does for users) and restores its mode.
#
#   scripts/bench_nonroot.sh [RUNS]        default 3
#
# Per run and side: a mount of synthetic:10240 (40 batches of 256 images
# of 224 px, 1.5 GB) with a 2 GiB buffer, every batch produced before
# the read starts (state idle), then one reader's GB/s over all of them
# (scripts/python/bench_read.py: plain reads into one buffer). Root's
# mount serves reads by FUSE passthrough from the huge-page tmpfs; user
# nobody's through fusermount3, by the daemon from a memfd.
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the rows alone on standard output
scripts/setup.sh
source scripts/lib.sh
runs=${1:-3}
build_tsock
chmod 755 "$work"
fuse_mode=$(stat -c %a /dev/fuse)
# At the end, whatever ended it: /dev/fuse's mode back, the daemon
# stopped (either user's: root may signal it), no mount left (root cannot
# look into nobody's mount, so /proc/mounts says whether it is there).
finish() {
	chmod "$fuse_mode" /dev/fuse
	if [[ -n "$daemon" ]]; then
		kill -TERM "$daemon" 2>/dev/null
		wait "$daemon" 2>/dev/null || true
		daemon=
	fi
	if grep -q " $mnt " /proc/mounts; then umount -l "$mnt"; fi
	cleanup
}
trap finish EXIT
chmod 0666 /dev/fuse
user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
mkdir -p "$mnt"
chown 65534:65534 "$mnt"
args=(--source synthetic:10240 --batch-size 256 --image-size 224 --epochs 1 --buffer 2GiB)

# side AS: one mount, every batch made, one reader; writes GB/s and the
# data path's first words to $work/AS. Not in a subshell: cleanup must
# know the daemon to stop it if the run fails half-way.
side() {
	local as=$1 run=()
	[[ $as == nobody ]] && run=(user)
	"${run[@]}" "$tsock" mount "$mnt" "${args[@]}" >"$work/mount.log" 2>&1 &
	daemon=$!
	for _ in $(seq 600); do
		"${run[@]}" test -e "$mnt/status" 2>/dev/null && break
		kill -0 "$daemon" 2>/dev/null || { cat "$work/mount.log"; exit 1; }
		sleep 0.05
	done
	"${run[@]}" mkdir "$mnt/consumers/r0"
	until [[ $("${run[@]}" cat "$mnt/state") == idle ]]; do sleep 0.2; done
	local rate path
	# The glob is the reader's: root cannot list nobody's mount.
	rate=$("${run[@]}" bash -c '/usr/bin/python3 scripts/python/bench_read.py "$0"/consumers/r0/*.safetensors' "$mnt")
	path=$("${run[@]}" grep '^data path:' "$mnt/status" | cut -d';' -f1 | cut -c12-)
	if [[ $as == nobody ]]; then user fusermount3 -u "$mnt"; else kill -TERM "$daemon"; fi
	wait "$daemon"
	daemon=
	echo "$rate $path" >"$work/$as"
}

for run in $(seq "$runs"); do
	echo "== without root, run $run of $runs"
	side root
	side nobody
	read -r root_rate root_path <"$work/root"
	read -r user_rate user_path <"$work/nobody"
	echo "nonroot $user_rate $root_rate" >>"$work/results.txt"
	echo "root: $root_rate GB/s ($root_path); nobody: $user_rate GB/s ($user_path)"
done
"$py" - "$work/results.txt" >&3 <<'PY'
import sys
sys.path.insert(0, "scripts/python")
from benchtable import header, med, ratio
rows = [line.split() for line in open(sys.argv[1])]
user, root = [float(r[1]) for r in rows], [float(r[2]) for r in rows]
print(header(f"\n### Without root: medians of {len(rows)} runs (min-max of each ratio)"))
print(f"| read GB/s, 1 reader, as a user without root (daemon reads from a memfd) | {med(user):.2f} | root (passthrough from tmpfs) {med(root):.2f} | {ratio(user, root)} |")
PY
