#!/usr/bin/env bash
# Without root, measured: what a user without root gets against root, on
# the same machine, the two interleaved in each run (medians of RUNS runs,
# min-max of each ratio). Run as root: it makes /dev/fuse openable by all
# for the run (as an administrator does for users) and restores its mode.
#
#   scripts/bench_nonroot.sh [RUNS] [IMAGES]      default 3 runs, 10240 images
#
# Per run, per shape (1 reader and 4 readers, each by read() and by mmap)
# and per side: a mount of synthetic:IMAGES (10240: 40 batches of 256
# images of 224 px, 1.5 GB) with a 2 GiB buffer, every batch produced
# before the read starts (state idle), then the readers, one consumer
# each, all at once (scripts/python/bench_read.py: plain reads into one
# buffer, or a mapping copied out once). GB/s is every reader's bytes over
# their common span; the daemon's CPU seconds (user and system) over the
# read, per GB read. Root's mount serves reads by FUSE passthrough from
# the huge-page tmpfs; user nobody's through fusermount3, by the daemon
# from a memfd (each batch read ahead into the page cache).
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the rows alone on standard output
source scripts/lib.sh
runs=${1:-3}
images=${2:-10240}
if [[ -n "${TSOCK:-}" ]]; then
	cp "$TSOCK" "$tsock"
else
	scripts/setup.sh
	build_tsock
fi
# The readers need only Python's standard library: the system's Python,
# which user nobody can run.
reader=${READER_PY:-/usr/bin/python3}
chmod 755 "$work"
cp scripts/python/bench_read.py "$work/"
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
# An array, not a function: the daemon's PID is then tsock's own
# (setpriv execs it), whose CPU time the run reads.
user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
mkdir -p "$mnt"
chown 65534:65534 "$mnt"
args=(--source "synthetic:$images" --batch-size 256 --image-size 224 --epochs 1 --buffer 2GiB)
cputicks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# side AS READERS MODE: one mount, every batch made, READERS readers by
# MODE (read or mmap); appends "GB/s CPU-s/GB" to $work/AS. Not in a
# subshell: cleanup must know the daemon to stop it if the run fails.
side() {
	local as=$1 readers=$2 mode=$3 run=() flags=(--times) pids=() i
	[[ $as == nobody ]] && run=("${user[@]}")
	[[ $mode == mmap ]] && flags+=(--mmap)
	"${run[@]}" "$tsock" mount "$mnt" "${args[@]}" >"$work/mount.log" 2>&1 &
	daemon=$!
	for _ in $(seq 600); do
		"${run[@]}" test -e "$mnt/status" 2>/dev/null && break
		kill -0 "$daemon" 2>/dev/null || { cat "$work/mount.log"; exit 1; }
		sleep 0.05
	done
	for i in $(seq "$readers"); do "${run[@]}" mkdir "$mnt/consumers/r$i"; done
	until [[ $("${run[@]}" cat "$mnt/state") == idle ]]; do sleep 0.2; done
	local cpu0
	cpu0=$(cputicks "$daemon")
	for i in $(seq "$readers"); do
		# The glob is the reader's: root cannot list nobody's mount.
		"${run[@]}" bash -c '"$0" "$1"/bench_read.py "${@:3}" "$2"/*.safetensors' \
			"$reader" "$work" "$mnt/consumers/r$i" "${flags[@]}" >"$work/reader$i" &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i"; done
	local cpu1
	cpu1=$(cputicks "$daemon")
	"${run[@]}" grep '^data path:' "$mnt/status" | cut -d';' -f1 >"$work/path.$as"
	if [[ $as == nobody ]]; then "${user[@]}" fusermount3 -u "$mnt"; else kill -TERM "$daemon"; fi
	wait "$daemon"
	daemon=
	cat "$work"/reader* | "$reader" -c '
import sys
rows = [line.split() for line in sys.stdin]
total = sum(int(r[1]) for r in rows)
span = max(float(r[3]) for r in rows) - min(float(r[2]) for r in rows)
cpu = (int(sys.argv[2]) - int(sys.argv[1])) / 100  # clock ticks
print(f"{total / span / 1e9:.3f} {cpu / (total / 1e9):.3f}")' "$cpu0" "$cpu1" >>"$work/$as.$readers.$mode"
	rm -f "$work"/reader*
}

for run in $(seq "$runs"); do
	echo "== without root, run $run of $runs"
	for readers in 1 4; do
		for mode in read mmap; do
			# The side that goes first alternates from run to run.
			if ((run % 2)); then side root "$readers" "$mode"; side nobody "$readers" "$mode"
			else side nobody "$readers" "$mode"; side root "$readers" "$mode"; fi
			echo "$readers $mode: root $(tail -1 "$work/root.$readers.$mode"); nobody $(tail -1 "$work/nobody.$readers.$mode")"
		done
	done
done
echo "root's data path: $(cat "$work/path.root")"
echo "nobody's data path: $(cat "$work/path.nobody")"
"$reader" - "$work" "$runs" >&3 <<'PY'
import sys
sys.path.insert(0, "scripts/python")
from benchtable import header, med, ratio, spread
work, runs = sys.argv[1], sys.argv[2]
print(header(f"\n### Without root: medians of {runs} runs (spread min-max; each ratio within its run)",
             ("readers, by", "user without root: GB/s", "root: GB/s", "ratio", "daemon CPU s per GB read: user (root)")))
for readers in (1, 4):
    for mode in ("read", "mmap"):
        def col(side, k):
            return [float(line.split()[k]) for line in open(f"{work}/{side}.{readers}.{mode}")]
        user, root = col("nobody", 0), col("root", 0)
        how = "read()" if mode == "read" else "mmap"
        print(f"| {readers} ({how}) | {med(user):.2f} ({spread(user)}) | {med(root):.2f} ({spread(root)}) | "
              f"{ratio(user, root)} | {med(col('nobody', 1)):.2f} ({med(col('root', 1)):.2f}) |")
PY
