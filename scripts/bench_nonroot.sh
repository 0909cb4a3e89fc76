#!/usr/bin/env bash
# Without root, measured: what a user without root gets against root, on
# the same machine, interleaved in each run (medians of RUNS runs, min-max
# of each ratio). Run as root: it makes /dev/fuse openable by all for the
# run (as an administrator does for users) and restores its mode.
#
#   scripts/bench_nonroot.sh [RUNS] [IMAGES] [MODES]   default 3 runs, 10240 images, every mode
#
# Three sides: root as it runs by default (FUSE passthrough from the
# huge-page tmpfs root mounts), root with --storage memfd (passthrough
# from a memfd: the 4 KiB pages a user's memory comes in), and user nobody
# (through fusermount3; the daemon serves reads from a memfd, each batch
# read ahead into the page cache). The side that goes first alternates.
#
# Per run, per shape (1 reader and 4 readers, each by read(), by mmap, by
# read() of a page cache already full, and as a training gets batches
# from the shipped client: every array copied into a preallocated buffer;
# without root, the client maps the batch from the daemon's own file
# around FUSE, /proc/PID/fd/N, where the daemon offers it) and per side: a mount of
# synthetic:IMAGES (10240: 40 batches of 256 images of 224 px, 1.5 GB)
# with a 2 GiB buffer, every batch produced before the read starts (state
# idle), then the readers, one consumer each, all at once
# (scripts/python/bench_read.py: plain reads into one buffer, or a mapping
# copied out once). "Page cache full": one more consumer reads every batch
# first, untimed, so that the timed readers find every byte in the page
# cache: the most a reader gets through the mount whatever the daemon
# does. GB/s is every reader's bytes over their common span; the daemon's
# CPU seconds (user and system) over the read, per GB read. Last, the page
# size alone: plain files in a tmpfs of 4 KiB pages against one of huge
# pages, no FUSE.
set -euo pipefail
cd "$(dirname "$0")/.."
exec 3>&1 1>&2 # the rows alone on standard output
source scripts/lib.sh
runs=${1:-3}
images=${2:-10240}
modes=${3:-read mmap cached client}
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
mkdir "$work/client" # the client, for --client (user nobody reads it there)
cp -r scripts/python/tsock "$work/client/"
chmod -R a+rX "$work/client"
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
	for t in "$work/pages4k" "$work/pageshuge"; do
		if grep -q " $t " /proc/mounts; then umount "$t"; fi
	done
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
# MODE (read, mmap or cached); appends "GB/s CPU-s/GB" to $work/AS. Not in a
# subshell: cleanup must know the daemon to stop it if the run fails.
side() {
	local as=$1 readers=$2 mode=$3 run=() flags=(--times) storage=() pids=() i
	[[ $as == nobody ]] && run=("${user[@]}")
	[[ $as == memfd ]] && storage=(--storage memfd)
	[[ $mode == mmap ]] && flags+=(--mmap)
	[[ $mode == client ]] && flags+=(--client)
	"${run[@]}" "$tsock" mount "$mnt" "${args[@]}" "${storage[@]}" >"$work/mount.log" 2>&1 &
	daemon=$!
	for _ in $(seq 600); do
		"${run[@]}" test -e "$mnt/status" 2>/dev/null && break
		kill -0 "$daemon" 2>/dev/null || { cat "$work/mount.log"; exit 1; }
		sleep 0.05
	done
	for i in $(seq "$readers"); do "${run[@]}" mkdir "$mnt/consumers/r$i"; done
	# The client says its consumer reads around FUSE (read_ahead 0) after
	# its first batch, as tsock.Consumer does; here before the reader's
	# glob, whose readdir looks every batch up at once (the filler would
	# read them all ahead before the first batch is mapped).
	if [[ $mode == client ]]; then
		for i in $(seq "$readers"); do "${run[@]}" sh -c 'echo 0 >"$0"' "$mnt/consumers/r$i/read_ahead"; done
	fi
	[[ $mode == cached ]] && "${run[@]}" mkdir "$mnt/consumers/warm"
	until [[ $("${run[@]}" cat "$mnt/state") == idle ]]; do sleep 0.2; done
	if [[ $mode == cached ]]; then
		"${run[@]}" bash -c '"$0" "$1"/bench_read.py "$2"/*.safetensors' "$reader" "$work" "$mnt/consumers/warm" >/dev/null
	fi
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

# The page size alone, no FUSE: the same reader over plain files of a
# batch's size in a tmpfs of 4 KiB pages (what a FUSE page cache is made
# of on kernels without large folios for FUSE) and in one of huge pages
# (what root's passthrough reads from). Appends GB/s to $work/pages.SIZE.
mkdir -p "$work/pages4k" "$work/pageshuge"
mount -t tmpfs -o size=2G,huge=never tsock-bench "$work/pages4k"
mount -t tmpfs -o size=2G,huge=always tsock-bench "$work/pageshuge"
files=$(( images / 256 )) # a batch's worth each, at most 40
files=$(( files < 1 ? 1 : files > 40 ? 40 : files ))
for i in $(seq "$files"); do
	head -c $(( 256 * 224 * 224 * 3 )) /dev/urandom >"$work/pages4k/$i"
	cp "$work/pages4k/$i" "$work/pageshuge/$i"
done
pages() {
	"$reader" "$work/bench_read.py" "$work/pages$1"/* >>"$work/pages.$1"
}

for run in $(seq "$runs"); do
	echo "== without root, run $run of $runs"
	if ((run % 2)); then pages 4k; pages huge; else pages huge; pages 4k; fi
	for readers in 1 4; do
		for mode in $modes; do
			# The side that goes first alternates from run to run.
			if ((run % 2)); then sides=(root memfd nobody); else sides=(nobody memfd root); fi
			for as in "${sides[@]}"; do side "$as" "$readers" "$mode"; done
			echo "$readers $mode: root $(tail -1 "$work/root.$readers.$mode"); root from a memfd $(tail -1 "$work/memfd.$readers.$mode"); nobody $(tail -1 "$work/nobody.$readers.$mode")"
		done
	done
done
echo "root's data path: $(cat "$work/path.root")"
echo "root's data path with --storage memfd: $(cat "$work/path.memfd")"
echo "nobody's data path: $(cat "$work/path.nobody")"
"$reader" - "$work" "$runs" "$modes" >&3 <<'PY'
import sys
sys.path.insert(0, "scripts/python")
from benchtable import header, med, ratio, spread
work, runs = sys.argv[1], sys.argv[2]
print(header(f"\n### Without root: medians of {runs} runs (spread min-max; each ratio within its run)",
             ("readers, by", "user without root: GB/s", "root: GB/s", "ratio",
              "root, batches in a memfd: GB/s", "ratio to it", "daemon CPU s per GB read: user (root)")))
for readers in (1, 4):
    for mode in sys.argv[3].split():
        def col(side, k):
            return [float(line.split()[k]) for line in open(f"{work}/{side}.{readers}.{mode}")]
        user, root, memfd = col("nobody", 0), col("root", 0), col("memfd", 0)
        how = {"read": "read()", "mmap": "mmap", "cached": "read(), page cache full", "client": "the client, arrays copied out"}[mode]
        print(f"| {readers} ({how}) | {med(user):.2f} ({spread(user)}) | {med(root):.2f} ({spread(root)}) | "
              f"{ratio(user, root)} | {med(memfd):.2f} ({spread(memfd)}) | {ratio(user, memfd)} | "
              f"{med(col('nobody', 1)):.2f} ({med(col('root', 1)):.2f}) |")
small, huge = ([float(line) for line in open(f"{work}/pages.{size}")] for size in ("4k", "huge"))
print(f"\nThe page size alone (plain tmpfs files, no FUSE, one reader by read()): 4 KiB pages "
      f"{med(small):.2f} ({spread(small)}) GB/s, huge pages {med(huge):.2f} ({spread(huge)}) GB/s: "
      f"{ratio(small, huge)}")
PY
