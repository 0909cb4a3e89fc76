#!/usr/bin/env bash
# The Slurm recipe on a real Slurm: Debian's munge and slurm-wlm, two
# nodes on this machine (munged, slurmctld and a slurmd per node started
# here, in a work folder, on ports of their own; stopped by PID at the
# end). Run as root
# (scripts/test.sh does). It submits sweep.sbatch as a user would and
# checks: the job ends COMPLETED within seconds of its trials; every trial
# ran as its own consumer and read exact epochs; no mount and no
# mountpoint is left; a tsock that cannot start fails the job at once
# with its message; scancel leaves no mount and no mountpoint.
#
#   scripts/deploy/slurm/test.sh TSOCK_BINARY
set -euo pipefail
cd "$(dirname "$0")/../../.."
tsock_bin=$(realpath "$1")
command -v slurmctld >/dev/null || TSOCK_SETUP_SLURM=1 scripts/setup.sh
work=$(mktemp -d /tmp/tsock-slurm.XXXXXX)
pids=()
cleanup() {
	set +e
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done
	grep -q " /dev/shm/tsock-" /proc/mounts && { echo "slurm test: a mount was left: $(grep /dev/shm/tsock- /proc/mounts)" >&2; }
	rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "slurm test: FAIL: $*" >&2; exit 1; }

# munge: a key of its own, a socket of its own.
mkdir -p "$work/munge"
dd if=/dev/urandom of="$work/munge/key" bs=128 count=1 status=none
chmod 0400 "$work/munge/key"
/usr/sbin/munged --force --key-file="$work/munge/key" --socket="$work/munge/sock" \
	--pid-file="$work/munge/pid" --log-file="$work/munge/log" --seed-file="$work/munge/seed"
pids+=("$(cat "$work/munge/pid")")

host=$(hostname -s)
# MemAvailable, in MiB, less a GiB (from the kernel: procps's free is not on a bare Debian).
mem=$(($(awk '/^MemAvailable:/ { print int($2 / 1024) }' /proc/meminfo) - 1024))
port=$((20000 + RANDOM % 20000))
cat >"$work/slurm.conf" <<CONF
ClusterName=tsocktest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/sock
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool/%n
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd-%n.pid
SlurmctldPort=$port
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
KillWait=5
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
NodeName=n1 NodeHostname=$host Port=$((port + 1)) CPUs=$(nproc) RealMemory=$((mem / 2)) State=UNKNOWN
NodeName=n2 NodeHostname=$host Port=$((port + 2)) CPUs=$(nproc) RealMemory=$((mem / 2)) State=UNKNOWN
PartitionName=cpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
mkdir -p "$work/state" "$work/spool/n1" "$work/spool/n2"
export SLURM_CONF="$work/slurm.conf"
/usr/sbin/slurmctld -f "$SLURM_CONF"
/usr/sbin/slurmd -f "$SLURM_CONF" -N n1
/usr/sbin/slurmd -f "$SLURM_CONF" -N n2
for _ in $(seq 100); do [[ -s $work/slurmctld.pid && -s $work/slurmd-n1.pid && -s $work/slurmd-n2.pid ]] && break; sleep 0.1; done
pids+=("$(cat "$work/slurmctld.pid")" "$(cat "$work/slurmd-n1.pid")" "$(cat "$work/slurmd-n2.pid")")
for _ in $(seq 100); do [[ $(sinfo -h -N -o %t 2>/dev/null | grep -c idle) == 2 ]] && break; sleep 0.2; done
[[ $(sinfo -h -N -o %t | grep -c idle) == 2 ]] || fail "the two nodes are not idle: $(sinfo -N 2>&1)"

# What a user puts in the submit directory: train.py reads two epochs
# of its consumer and writes what it saw; sweep.py gives a rate.
mkdir -p "$work/submit" "$work/bin"
cp "$tsock_bin" "$work/bin/tsock"
# Debian's Python, with its torch (the DDP job's), whatever else PATH has.
ln -s /usr/bin/python3 "$work/bin/python3"
export PATH="$work/bin:$PATH"
cat >"$work/submit/sweep.py" <<'PY'
import sys
print(0.1 / (1 + int(sys.argv[2])))
PY
cat >"$work/submit/train.py" <<'PY'
import argparse, json, os, struct
ap = argparse.ArgumentParser()
ap.add_argument("--data"); ap.add_argument("--consumer"); ap.add_argument("--lr", type=float)
a = ap.parse_args()
d = os.path.join(a.data, "consumers", a.consumer)
os.mkdir(d)
with open(os.path.join(d, "batch_size"), "w") as f:
    f.write("8\n")
epochs, j = {}, 0
while len(epochs) < 3:  # two whole epochs: stop at the third's first batch
    with open(os.path.join(d, f"{j:06d}.safetensors"), "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8:8 + n])
    lo, hi = head["indices"]["data_offsets"]
    raw = data[8 + n + lo:8 + n + hi]
    idx = list(struct.unpack(f"<{len(raw) // 8}q", raw))
    epochs.setdefault(int(head["__metadata__"]["epoch"]), []).extend(idx)
    j += 1
os.rmdir(d)
with open(f"result-{a.consumer}.json", "w") as f:
    json.dump({"lr": a.lr, "node": os.environ["SLURMD_NODENAME"], "mount": a.data,
               "epochs": [sorted(epochs[e]) for e in sorted(epochs)[:2]]}, f)
PY

state() { scontrol show job "$1" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
wait_done() { # JOB [OUTPUT]: until it is over
	for _ in $(seq 600); do
		case $(state "$1") in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) return ;; esac
		sleep 0.2
	done
	fail "job $1 still $(state "$1") after 120 s: $(cat "${2:-/dev/null}" 2>/dev/null)"
}
no_leftovers() { # JOB
	grep -q " /dev/shm/tsock-$1\." /proc/mounts && fail "job $1 left a mount: $(grep " /dev/shm/tsock-$1\." /proc/mounts)"
	! compgen -G "/dev/shm/tsock-$1.*" >/dev/null || fail "job $1 left a mountpoint: $(compgen -G "/dev/shm/tsock-$1.*")"
}

# 1. A sweep over the 2 nodes, 2 trials on each, CPU only, no cache.
# Held at first, so that another user (nobody) plants a file and a link
# at the names a guessable recipe would use for its mountpoints: the job
# must neither fail for them nor mount through the link.
cd "$work/submit"
job=$(SOURCE=synthetic:40 TRIALS_PER_NODE=2 TRIAL_GPUS=0 TSOCK_CACHE=0 TSOCK_ARGS="--batch-size 8 --buffer 4MiB --image-size 8" \
	sbatch --hold --parsable --nodes=2 --output="$work/sweep-%j.out" "$OLDPWD/scripts/deploy/slurm/sweep.sbatch")
mkdir -p "$work/victim"
setpriv --reuid=65534 --regid=65534 --clear-groups touch "/dev/shm/tsock-$job.n1"
setpriv --reuid=65534 --regid=65534 --clear-groups ln -s "$work/victim" "/dev/shm/tsock-$job.n2"
start=$(date +%s.%N)
scontrol release "$job"
wait_done "$job"
end=$(date +%s.%N)
[[ $(state "$job") == COMPLETED ]] || fail "sweep job $job ended $(state "$job") beside the planted names:
$(cat "$work/sweep-$job.out")"
grep -q " $work/victim " /proc/mounts && fail "job $job mounted through the planted link"
[[ -f /dev/shm/tsock-$job.n1 && -L /dev/shm/tsock-$job.n2 ]] || fail "job $job touched the planted names"
rm -f "/dev/shm/tsock-$job.n1" "/dev/shm/tsock-$job.n2"
no_leftovers "$job"
# tsock was unmounted, not killed: its step (and every other) ended with 0.
if grep -E "srun: error|Killed|terminated" "$work/sweep-$job.out"; then
	fail "a step of job $job did not end cleanly"
fi
for k in 0 1 2 3; do
	[[ -s result-trial-$k.json ]] || fail "trial $k wrote nothing:
$(cat "$work/sweep-$job.out")"
	python3 - "result-trial-$k.json" <<'PY' || fail "trial $k's epochs are not exact"
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["epochs"]) == 2 and all(e == list(range(40)) for e in r["epochs"]), r
assert r["mount"].endswith("." + r["node"]), r  # its own node's mount
PY
done
per_node=$(python3 -c 'import json, sys; print(" ".join(sorted(json.load(open(f))["node"] for f in sys.argv[1:])))' result-trial-*.json)
[[ $per_node == "n1 n1 n2 n2" ]] || fail "trials ran on nodes $per_node, want 2 on each of n1 and n2"
echo "slurm test: sweep job $job over 2 nodes (beside a file and a link another user planted at guessable names) COMPLETED in $(awk "BEGIN { printf \"%.1f\", $end - $start }") s, 4 trials (2 a node, each on its node's mount) of exact epochs, no mount left"

# 2. A tsock that cannot start fails the job at once, with its message.
start=$(date +%s.%N)
job=$(SOURCE=/nonexistent TRIALS_PER_NODE=1 TRIAL_GPUS=0 TSOCK_CACHE=0 \
	sbatch --parsable --nodes=2 --output="$work/bad-%j.out" "$OLDPWD/scripts/deploy/slurm/sweep.sbatch")
wait_done "$job"
end=$(date +%s.%N)
[[ $(state "$job") == FAILED ]] || fail "a bad source: job $job ended $(state "$job")"
grep -q "nonexistent" "$work/bad-$job.out" || fail "a bad source: tsock's message is not in the job's output:
$(cat "$work/bad-$job.out")"
no_leftovers "$job"
echo "slurm test: a bad source: job $job FAILED in $(awk "BEGIN { printf \"%.1f\", $end - $start }") s, with tsock's message, no mount left"

# 2b. A tsock that is not ready in TSOCK_READY_WAIT (its source, a store
# that accepts connections and never answers, keeps it indexing) is
# stopped on every node, and the job fails then, not at its time limit.
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True)
held = []
while True: held.append(s.accept()[0])
' >"$work/silent.port" &
silent=$!
for _ in $(seq 100); do [[ -s $work/silent.port ]] && break; sleep 0.1; done
start=$(date +%s.%N)
job=$(SOURCE='s3://data/train-{0..3}.tar' TRIALS_PER_NODE=1 TRIAL_GPUS=0 TSOCK_CACHE=0 TSOCK_READY_WAIT=3 \
	TSOCK_ARGS="--s3-endpoint http://127.0.0.1:$(cat "$work/silent.port") --shard-index none" AWS_ACCESS_KEY_ID=k AWS_SECRET_ACCESS_KEY=s \
	sbatch --parsable --nodes=2 --time=10 --output="$work/slow-%j.out" "$OLDPWD/scripts/deploy/slurm/sweep.sbatch")
wait_done "$job" "$work/slow-$job.out"
end=$(date +%s.%N)
kill "$silent"; wait "$silent" 2>/dev/null || true
[[ $(state "$job") == FAILED ]] || fail "a tsock never ready: job $job ended $(state "$job"), want FAILED: $(cat "$work/slow-$job.out")"
grep -q "not ready after 3 s (TSOCK_READY_WAIT): stopping it" "$work/slow-$job.out" || fail "a tsock never ready: the job does not say so:
$(cat "$work/slow-$job.out")"
for _ in $(seq 100); do compgen -G "/dev/shm/tsock-$job.*" >/dev/null || break; sleep 0.1; done
(no_leftovers "$job") || fail "a tsock never ready: $(cat "$work/slow-$job.out")"
echo "slurm test: a tsock never ready: job $job FAILED in $(awk "BEGIN { printf \"%.1f\", $end - $start }") s (TSOCK_READY_WAIT=3), tsock stopped on both nodes, no mount left"

# 3. scancel while the trials run: no mount, no mountpoint left.
cat >"$work/submit/train.py" <<'PY'
import time
time.sleep(600)
PY
job=$(SOURCE=synthetic:40 TRIALS_PER_NODE=1 TRIAL_GPUS=0 TSOCK_CACHE=0 TSOCK_ARGS="--batch-size 8 --buffer 4MiB --image-size 8" \
	sbatch --parsable --nodes=2 --output="$work/cancel-%j.out" "$OLDPWD/scripts/deploy/slurm/sweep.sbatch")
for _ in $(seq 300); do [[ $(grep -c " /dev/shm/tsock-$job\." /proc/mounts) == 2 ]] && break; sleep 0.1; done
[[ $(grep -c " /dev/shm/tsock-$job\." /proc/mounts) == 2 ]] || fail "job $job never mounted on both nodes: $(cat "$work/cancel-$job.out")"
scancel "$job"
wait_done "$job"
for _ in $(seq 100); do compgen -G "/dev/shm/tsock-$job.*" >/dev/null || break; sleep 0.1; done
no_leftovers "$job"
echo "slurm test: scancel: job $job $(state "$job"), no mount, no mountpoint left"

# 4. One data-parallel trial (torch DDP, gloo) of 4 ranks over the 2
# nodes (DDP_RANKS_PER_NODE=2): each node's tsock serves its node's share
# (--node K/2 from Slurm's SLURM_NODEID/SLURM_NNODES) to the 2 ranks it
# runs; every step all-reduces, as DDP's backward does (a rank with a
# step more would wait there forever). Two epochs: the job ends
# COMPLETED, every sample reached a rank each epoch (fewer than 4 twice:
# padding), every rank took the same steps, ranks 0-1 read n1's mount and
# 2-3 n2's. Then a rank killed mid-epoch fails the job (srun
# --kill-on-bad-exit), at once, nothing left mounted.
cat >"$work/submit/train.py" <<'PY'
import argparse, json, os, signal
import torch
import torch.distributed as dist
import tsock
ap = argparse.ArgumentParser()
ap.add_argument("--data"); ap.add_argument("--consumer"); ap.add_argument("--lr", type=float)
a = ap.parse_args()
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
kill_at = int(os.environ.get("KILL_RANK_AT", "-1"))
c = tsock.Consumer(a.data, name=a.consumer, batch_size=4)
seen, steps = [], []
for e, epoch in enumerate(c.epochs()):
    if e == 2:
        break
    mine, n = [], 0
    for b in epoch:
        if rank == world - 1 and e == 0 and n == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        t = torch.ones(1)
        dist.all_reduce(t)  # a step
        mine += b["indices"].tolist()
        n += 1
    seen.append(mine)
    steps.append(n)
everyone = [None] * world
dist.all_gather_object(everyone, (seen, steps, os.environ["SLURMD_NODENAME"], a.data))
if rank == 0:
    exact = all(set(i for s, _, _, _ in everyone for i in s[e]) == set(range(40))
                and sum(len(s[e]) for s, _, _, _ in everyone) - 40 < world for e in range(2))
    with open("result-ddp.json", "w") as f:
        json.dump({"exact": exact, "steps": [st for _, st, _, _ in everyone],
                   "nodes": [nd for _, _, nd, _ in everyone], "mounts": [m for _, _, _, m in everyone]}, f)
c.close()
dist.barrier()
os._exit(0)  # past gloo's teardown (ddp_accuracy.py says why)
PY
ddp_env=(SOURCE=synthetic:40 DDP_RANKS_PER_NODE=2 TRIAL_GPUS=0 TSOCK_CACHE=0 TSOCK_ARGS="--batch-size 8 --buffer 4MiB --image-size 8"
	MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 3)) PYTHONPATH="$OLDPWD/scripts/python")
start=$(date +%s.%N)
job=$(env "${ddp_env[@]}" sbatch --parsable --nodes=2 --output="$work/ddp-%j.out" "$OLDPWD/scripts/deploy/slurm/sweep.sbatch")
wait_done "$job" "$work/ddp-$job.out"
end=$(date +%s.%N)
[[ $(state "$job") == COMPLETED ]] || fail "DDP job $job ended $(state "$job"):
$(cat "$work/ddp-$job.out")"
no_leftovers "$job"
python3 - result-ddp.json <<'PY' || fail "DDP job $job: not exact, or ranks on the wrong nodes: $(cat result-ddp.json; cat "$work/ddp-$job.out")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["exact"], r
assert r["steps"] == [[3, 3]] * 4, r  # 20 samples a node, 10 a rank: 3 steps of 4, 4, 2
assert r["nodes"] == ["n1", "n1", "n2", "n2"], r
assert all(m.endswith("." + n) for m, n in zip(r["mounts"], r["nodes"])), r  # each on its node's mount
PY
echo "slurm test: a DDP trial of 4 ranks over 2 nodes (job $job, each node's tsock serving its half): COMPLETED in $(awk "BEGIN { printf \"%.1f\", $end - $start }") s, every epoch exact, every rank 3 steps an epoch"
start=$(date +%s.%N)
job=$(env "${ddp_env[@]}" MASTER_PORT=$((port + 4)) KILL_RANK_AT=1 sbatch --parsable --nodes=2 --output="$work/ddpkill-%j.out" "$OLDPWD/scripts/deploy/slurm/sweep.sbatch")
wait_done "$job" "$work/ddpkill-$job.out"
end=$(date +%s.%N)
[[ $(state "$job") == FAILED ]] || fail "DDP job $job with a rank killed ended $(state "$job"), want FAILED:
$(cat "$work/ddpkill-$job.out")"
for _ in $(seq 100); do compgen -G "/dev/shm/tsock-$job.*" >/dev/null || break; sleep 0.1; done
no_leftovers "$job"
echo "slurm test: a rank killed mid-epoch: DDP job $job FAILED in $(awk "BEGIN { printf \"%.1f\", $end - $start }") s, no mount left"
