#!/usr/bin/env bash
# Churn soak: a mount that runs forever (--epochs 0) while WORKERS
# consumers join, read a random number of batches at random batch sizes
# (some holding a few mapped), leave, and now and then get SIGKILLed
# mid-read; one more maps each batch and closes it at once (np.memmap's
# way with a file), keeping up to 300 mapped: more than the buffer. Every 10 s it samples the daemon's fds, threads and RSS, batch
# memory (Shmem growth) and the batch inodes the kernel holds, prints the
# table, and fails if any of them grew after the warm-up beyond a small
# slack: a long run must stay flat.
#
#   scripts/soak.sh [SECONDS] [WORKERS]     default 300 s, 8 workers
#
# Forever mode: the most epochs a second (one sample, one batch an
# epoch, --epochs 0) and one consumer reading as fast as it can. Every
# 10 s it samples the daemon's RSS and the producer's epoch, and fails if
# RSS grows by more than 16 KiB per 1,000 epochs after the warm-up
# (state kept per epoch or per batch: 225 KiB per 1,000 epochs once).
#
#   scripts/soak.sh forever [SECONDS]         default 300 s
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/lib.sh
build_tsock

forever() {
	local seconds=$1 reader rows="$work/forever.txt"
	mount_bg --source synthetic:1 --image-size 8 --batch-size 1 --epochs 0 --buffer 1MiB
	$py - "$mnt" <<'PY' &
import os, sys
d = os.path.join(sys.argv[1], "consumers", "fast")
os.mkdir(d)
i = 0
while True:
    try:
        fd = os.open(os.path.join(d, "%06d.safetensors" % i), os.O_RDONLY)
    except OSError:  # the mount stops
        break
    os.read(fd, 1 << 16)
    os.close(fd)
    i += 1
PY
	reader=$!
	local start=$(date +%s) until=$(($(date +%s) + seconds))
	echo "     s     epoch   rss_kib" | tee "$rows"
	while (($(date +%s) < until)); do
		sleep 10
		printf '%6s %9s %9s\n' "$(($(date +%s) - start))" \
			"$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["producer"]["epoch"])' "$mnt/status.json")" \
			"$(awk '/^VmRSS:/ { print $2 }' "/proc/$daemon/status")" | tee -a "$rows"
	done
	unmount
	wait "$reader" || true
	$py - "$rows" <<'PY'
import sys
rows = [list(map(int, l.split())) for l in open(sys.argv[1]).read().splitlines()[1:] if l.strip()]
after = rows[len(rows) // 3:]  # past the warm-up
epochs = after[-1][1] - after[0][1]
if len(after) < 3 or epochs < 1000:
    sys.exit(f"soak forever: only {epochs} epochs after the warm-up: too few to measure")
# The least-squares slope of RSS over epochs: one sample is noise (the
# collector's cycles move RSS by a MiB), the trend is growth.
n = len(after)
mx, my = sum(r[1] for r in after) / n, sum(r[2] for r in after) / n
per = 1000 * sum((r[1] - mx) * (r[2] - my) for r in after) / sum((r[1] - mx) ** 2 for r in after)
print(f"soak forever: {rows[-1][1]} epochs in {rows[-1][0]} s; RSS {after[0][2]} KiB after warm-up (epoch {after[0][1]}), "
      f"{rows[-1][2]} KiB at the end: {per:+.1f} KiB per 1,000 epochs (least squares over {n} samples)")
if per > 16:
    sys.exit("soak forever: RSS grows with the epochs")
PY
}
if [[ ${1:-} == forever ]]; then
	forever "${2:-300}"
	exit
fi

seconds=${1:-300}
workers=${2:-8}
shmem0=$(shmem)
mount_bg --source synthetic:2000 --image-size 64 --batch-size 32 --epochs 0 --buffer 64MiB --consumer-timeout 2s
until=$(($(date +%s) + seconds))

churn() { # churn SEED: consumers one after another until the deadline
	$py - "$mnt" "$1" "$until" <<'PY'
import os, random, sys, time
import tsock
mnt, seed, until = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
errors = 0
while time.time() < until:
    try:
        with tsock.Consumer(mnt, name=f"w{seed}-{rng.randrange(1 << 30)}", batch_size=rng.choice([None, 5, 16, 40])) as c:
            held = []
            for i, b in enumerate(c):
                if rng.random() < 0.2:
                    held.append(b)  # kept mapped for a while
                    if len(held) > 2:
                        held.pop(0)
                if i >= rng.randrange(1, 40):
                    break
    except tsock.TsockError as e:
        errors += 1
        print(f"worker {seed}: {e}", file=sys.stderr)
print(errors)
PY
}
memmapper() { # maps and closes, keeping up to KEEP mappings; prints its EDEADLKs
	$py - "$mnt" "$until" <<'PY'
import ctypes, errno, os, random, sys, time
mnt, until = sys.argv[1], int(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

def map_and_close(path):  # Python's own mmap keeps a dup of the fd: not this
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        p = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        if p in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap " + path)
        ctypes.c_char.from_address(p + size - 1).value  # fault it in
        return p, size
    finally:
        os.close(fd)

rng, deadlocks = random.Random(7), 0
while time.time() < until:
    d = os.path.join(mnt, "consumers", f"memmap-{rng.randrange(1 << 30)}")
    os.mkdir(d)
    maps, keep = [], rng.choice([4, 50, 300])
    try:
        for i in range(rng.randrange(50, 400)):
            if time.time() >= until:
                break
            maps.append(map_and_close(os.path.join(d, "%06d.safetensors" % i)))
            if len(maps) > keep:
                libc.munmap(*maps.pop(0))
    except OSError as e:
        if e.errno != errno.EDEADLK:
            raise
        deadlocks += 1
    for m in maps:
        libc.munmap(*m)
    os.rmdir(d)
print(deadlocks)
PY
}
killer() { # consumers SIGKILLed mid-read until the deadline
	local i=0 pid
	while (($(date +%s) < until)); do
		$py scripts/python/read_batches.py "$mnt" "victim-$i" --join >/dev/null 2>&1 &
		pid=$!
		sleep 0.$((RANDOM % 9 + 1))
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		rmdir "$mnt/consumers/victim-$i" 2>/dev/null || true
		i=$((i + 1))
	done
}

pids=()
for w in $(seq "$workers"); do
	churn "$w" >"$work/churn-$w.out" 2>"$work/churn-$w.err" &
	pids+=($!)
done
killer &
pids+=($!)
memmapper >"$work/memmap.out" &
pids+=($!)

# sample: one row. fds leaves out the batches the buffer holds (one
# descriptor each, bounded by --buffer): what is left must stay flat.
sample() {
	local st held
	st=$(cat "$mnt/status")
	held=$(sed -n 's/^buffer: .*(\([0-9]*\) batches held.*/\1/p' <<<"$st")
	printf '%6s %6s %8s %9s %10s %7s\n' "$(($(date +%s) - start))" \
		"$(($(ls "/proc/$daemon/fd" | wc -l) - held))" \
		"$(awk '/^Threads:/ { print $2 }' "/proc/$daemon/status")" \
		"$(awk '/^VmRSS:/ { print $2 }' "/proc/$daemon/status")" \
		"$((($(shmem) - shmem0) / 1024))" \
		"$(sed -n 's/^batch inodes held by the kernel: \([0-9]*\).*/\1/p' <<<"$st")"
}
start=$(date +%s)
samples="$work/samples.txt"
echo "     s    fds  threads   rss_kib  shmem_kib  inodes" | tee "$samples"
while (($(date +%s) < until)); do
	sleep 10
	sample | tee -a "$samples"
done
for p in "${pids[@]}"; do wait "$p"; done
errors=$(cat "$work"/churn-*.out | awk '{ s += $1 } END { print s + 0 }')
echo "consumer errors (each a TsockError a client raised, e.g. EDEADLK for one holding too much): $errors"
echo "EDEADLKs of the reader that maps and closes (more than the buffer kept mapped): $(cat "$work/memmap.out")"
unmount

# Flat: while the churn runs, no column may end above its value after the
# first third (warm-up) by more than a slack, and batch memory stays
# within the 64 MiB buffer, whatever readers keep mapped, and a slack
# for page rounding and the batch being made.
$py - "$samples" <<'PY'
import sys
rows = [list(map(int, l.split())) for l in open(sys.argv[1]).read().splitlines()[1:] if l.strip()]
warm, last = rows[len(rows) // 3], rows[-1]
slack = {"fds": (1, 16), "threads": (2, 8), "rss_kib": (3, 32 * 1024), "inodes": (5, 64)}
bad = [f"{k}: {warm[i]} after warm-up, {last[i]} at the end" for k, (i, s) in slack.items() if last[i] > warm[i] + s]
if max(r[4] for r in rows) > (64 + 8) * 1024:
    bad.append(f"batch memory {max(r[4] for r in rows)} KiB: over the 64 MiB buffer")
if bad:
    sys.exit("soak: grew: " + "; ".join(bad))
print("soak: flat (fds, threads, RSS, batch memory, batch inodes)")
PY
