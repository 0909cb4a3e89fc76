"""What the serve_* examples share: a `tsock mount --ingest` of their own,
consumer processes that join it, the example's producer, and a cleanup
that leaves no process and no mount behind."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def run(prog, tsock_bin, mount_args, consumers, serve):
    """Mounts with mount_args, starts each consumer command (its last
    argument is replaced by the mountpoint where it is None), waits until
    all have joined, calls serve(mountpoint), and returns each consumer's
    one JSON line, parsed. Exits with a message naming prog on failure."""
    tsock_bin = tsock_bin or os.environ.get("TSOCK_BIN") or "tsock"
    mnt = tempfile.mkdtemp(prefix=f"tsock-{prog}-")
    daemon = subprocess.Popen([tsock_bin, "mount", mnt, *mount_args], stdout=subprocess.PIPE, text=True)
    procs = []
    try:
        first = daemon.stdout.readline()
        if not first.startswith("tsock: mounted"):
            sys.exit(f"{prog}: tsock mount did not come up: {first!r}")
        for cmd in consumers:
            procs.append(subprocess.Popen([mnt if a is None else a for a in cmd], stdout=subprocess.PIPE, text=True))
        # Every consumer joins before the first batch: each then needs
        # exactly the mount's --epochs, which serve makes and returns.
        joined = os.path.join(mnt, "consumers")
        while len(os.listdir(joined)) < len(procs):
            if any(p.poll() is not None for p in procs):
                sys.exit(f"{prog}: a consumer exited before joining")
            time.sleep(0.05)
        serve(mnt)
        out = []
        for i, p in enumerate(procs):
            line = p.communicate()[0]
            if p.returncode != 0:
                sys.exit(f"{prog}: consumer {i} failed (exit {p.returncode})")
            out.append(json.loads(line))
        return out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait()
        os.rmdir(mnt)


def start_together(go):
    """With go (a path): says it is ready (a line in go.ready), then waits
    for the file go, so that every process of a benchmark starts at once,
    its imports done."""
    if go:
        with open(go + ".ready", "a") as f:
            f.write("ready\n")
        while not os.path.exists(go):
            time.sleep(0.005)


def mount(tsock_bin, mountpoint, args, prog):
    """Starts `tsock mount MOUNTPOINT ARGS…` (making the mountpoint) and
    returns the daemon once it is mounted; exits naming prog if not."""
    os.mkdir(mountpoint)
    daemon = subprocess.Popen([tsock_bin, "mount", mountpoint, *args], stdout=subprocess.PIPE, text=True)
    first = daemon.stdout.readline()
    if not first.startswith("tsock: mounted"):
        daemon.kill()
        daemon.wait()
        os.rmdir(mountpoint)
        sys.exit(f"{prog}: tsock mount did not come up: {first!r}")
    return daemon


def stop(procs, daemons, mountpoints):
    """Kills what of procs still runs, stops each daemon (SIGTERM: it
    unmounts) and removes the mountpoints."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    for d in daemons:
        d.send_signal(signal.SIGTERM)
        d.wait()
    for m in mountpoints:
        os.rmdir(m)


def decoded(mountpoint):
    """Images the mount's producer decoded: those it made, less those
    copied from what it kept (--keep)."""
    with open(os.path.join(mountpoint, "status.json")) as f:
        doc = json.load(f)
    return doc["producer"]["samples"] - (doc.get("kept") or {}).get("served", 0)
