"""A tsock mount's state, for programs and for people.

    doc = tsock.status.read("/mnt/tsock")     # MOUNTPOINT/status.json as a dict
    print(tsock.status.render(doc, "/mnt/tsock"))

The view is the one `tsock status` draws (80 columns); `python3 -m tsock
status MOUNTPOINT [--watch] [--json]` prints it without the Go binary.
"""
from __future__ import annotations

import errno
import json
import math
import os
import time
from typing import Any, Dict, List, Optional

from tsock import starting
from tsock.errors import TsockError

#: The layout of status.json this module reads.
VERSION = 1
WIDTH = 80


class StatusError(TsockError):
    """The mount's status cannot be read: said in one line."""


def read(mount: str | os.PathLike, start_timeout: Optional[float] = starting.START_TIMEOUT) -> Dict[str, Any]:
    """MOUNTPOINT/status.json as a dict (see the README for its fields).

    A mount still starting is waited for, saying so on stderr, for at
    most start_timeout seconds (0: not at all). Raises StatusError, in one
    line, where MOUNTPOINT is not a tsock mount, its daemon is gone, or
    the mount is another user's.
    """
    mount = os.fspath(mount)
    if start_timeout is None or start_timeout > 0:
        starting.wait(mount, start_timeout, error=StatusError)
    try:
        with open(os.path.join(mount, "status.json"), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise StatusError(_no_status(mount)) from None
    except PermissionError:
        raise StatusError(f"{mount}: permission denied (a mount is its owner's; mount with --allow-other to show it to others)") from None
    except OSError as e:
        if e.errno == errno.ENOTCONN:
            raise StatusError(f"{mount}: the tsock daemon is gone (transport endpoint is not connected); umount {mount}") from None
        raise StatusError(f"{mount}: {e.strerror}") from None
    try:
        doc = json.loads(data)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise StatusError(f"{mount} is not a tsock mount: its status.json is not tsock's") from None
    if doc.get("version") != VERSION:
        raise StatusError(f"{mount}: status.json version {doc.get('version')}, this tsock reads version {VERSION}: use the tsock that mounted it")
    return doc


def _no_status(mount: str) -> str:
    """Why mount has no status.json, as `tsock status` says it (the
    fixtures in tests/fixtures/status/reads.json hold both to it): a
    starting mount is starting, an empty directory may be about to be
    mounted, anything else is not a tsock mount."""
    if not os.path.exists(mount):
        return f"{mount}: no such file or directory"
    try:
        with open(os.path.join(mount, "starting"), encoding="utf-8", errors="replace") as f:
            return f"{mount}: tsock is starting, no status.json yet:\n{f.read().strip()}"
    except OSError:
        pass
    try:
        if not os.listdir(mount):
            return f"{mount}: nothing is mounted there yet (an empty directory): is `tsock mount` running?"
    except OSError:
        pass
    return f"{mount} is not a tsock mount (no status.json)"


def _ibytes(n: float) -> str:
    """n bytes as go-humanize's IBytes says them (1.5 KiB)."""
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    if n < 10:
        return f"{int(n)} B"
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n /= 1024
        i += 1
    val = math.floor(n * 10 + 0.5) / 10
    return f"{val:.0f} {units[i]}" if val >= 10 else f"{val:.1f} {units[i]}"


def _bar(f: float, width: int) -> str:
    f = min(f, 1.0) if f > 0 else 0.0
    full = int(f * width + 0.5)
    return "█" * full + "░" * (width - full)


def _sparkline(values: List[float]) -> str:
    levels = "▁▂▃▄▅▆▇█"
    top = max(values, default=0.0)
    marks = "".join(levels[min(int(v / top * 7 + 0.5), 7) if top > 0 and v > 0 else 0] for v in values)
    return f"{marks} {top:.0f}/s peak"


def _clip(s: str, n: int) -> str:
    """s cut to n columns, control characters as "?" (as `tsock status`)."""
    s = "".join("?" if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F else c for c in s)
    return s if len(s) <= n else s[: n - 1] + "…"


def _of_epochs(n: int, epochs: int) -> str:
    return f"{n}/∞" if epochs <= 0 else f"{n}/{epochs}"


def _duration(seconds: float) -> str:
    s = int(seconds)
    h, m, s = s // 3600, s // 60 % 60, s % 60
    return (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + f"{s}s"


def render(doc: Dict[str, Any], mount: str, now: Optional[float] = None) -> str:
    """The view of doc (a status.json) for a terminal of 80 columns."""
    lines: List[str] = []

    def line(label: str, text: str) -> None:
        lines.append(_clip(f"{label:<10}{text}", WIDTH))

    p, buf = doc["producer"], doc["buffer"]
    clock = time.strftime("%H:%M:%S", time.localtime(now))
    lines.append(_clip(f"tsock {mount}: {doc['state']}, up {_duration(doc['uptime_seconds'])}, {clock}", WIDTH))
    line("source", doc["source"])
    line("state", doc["state_text"])
    unit = p["unit"]
    if p["epoch_len"] > 0:
        line("epoch", f"{p['epoch'] + 1:<4} {_bar(p['epoch_done'] / p['epoch_len'], 20)}  {p['epoch_done']}/{p['epoch_len']} {unit}")
    else:
        line("epoch", f"{p['epoch'] + 1}, {p['epoch_done']} {unit} of it")
    line("rate", f"{p['rate']:.0f} {unit}/s (last 10 s), {p['rate_overall']:.0f} overall")
    if p["rate_history"]:
        line("last min", _sparkline(p["rate_history"]))
    held = buf["used"] + buf["reserved"] + max(buf["mapped_after_release"], 0)  # what counts against --buffer
    line("buffer", f"{_bar(held / max(buf['limit'], 1), 20)} {_ibytes(held)} of {_ibytes(buf['limit'])}, {buf['batches']} batches")
    if buf["mapped_after_release"] > 0:
        line("", f"{_ibytes(buf['mapped_after_release'])} of it released but still mapped by readers")
    kept = doc.get("kept")
    if kept:  # beside --buffer, under its own bound (--keep)
        text = (f"{_bar(kept['used'] / max(kept['limit'], 1), 20)} {_ibytes(kept['used'])} of {_ibytes(kept['limit'])}, "
                f"{kept['samples']} samples, ")
        # What matters most: the set does not fit.
        text += f"{kept['refused']} not kept" if kept["refused"] > 0 else f"{kept['served']} copies"
        line("kept", text)
    line("data path", doc["data_path"].split(" (")[0])  # the why is status's to say
    if doc.get("missing", 0) > 0:
        line("skipped", f"{doc['skipped']} inputs; {doc['missing']} keys missing, held until the epoch's end")
    else:
        line("skipped", f"{doc['skipped']} inputs")
    gpu = doc.get("gpu")
    if gpu:
        line("gpu", f"{gpu['name']}: {gpu['slabs_in_use']} of {gpu['slabs']} slabs of {_ibytes(gpu['slab_size'])} hold a batch")
    lines.append("")
    if not doc["consumers"]:
        lines.append(_clip(f"no consumer: mkdir {os.path.join(mount, 'consumers', 'NAME')} to join", WIDTH))
        return "\n".join(lines) + "\n"
    head = f"{'CONSUMER':<16} {'STATE':<8} {'EPOCH':<7} {'PROGRESS':<19} {'LAG':>5} {'WAIT':>5}"
    # A subset column only where some consumer trains on a part (and room
    # for it: not beside GPU memory).
    subsets = not gpu and any(c.get("subset", "all") not in ("", "all") for c in doc["consumers"])
    if subsets:
        head += " SUBSET"  # the last column: no padding
    if gpu:
        head += f" {'GPU MEM':>9}"
    lines.append(head)
    for c in doc["consumers"]:
        epoch, progress = _of_epochs(max(c["epoch"], 0) + 1, c["epochs"]), ""
        if c["epoch_len"] > 0:
            done = c["epoch_done"] / c["epoch_len"]
            progress = f"{_bar(done, 14)} {100 * min(done, 1):3.0f}%"
        row = f"{_clip(c['name'], 16):<16} {c['state']:<8} {epoch:<7} {progress:<19} {c['lag_batches']:>5} {100 * c['wait_share']:>4.0f}%"
        if subsets:
            row += " " + _clip(c.get("subset", ""), 11)
        if gpu:
            mem = c.get("gpu_memory")
            row += f" {_ibytes(mem) if mem is not None and mem >= 0 else '?':>9}"
        lines.append(_clip(row, WIDTH))  # a number no real mount reaches must not wrap it
        for r in c.get("ranks") or []:  # a group's ranks, under it
            world = c.get("world") or 1
            share = (c["epoch_len"] + world - 1) // world
            epoch, progress = _of_epochs(max(r["epoch"], 0) + 1, c["epochs"]), ""
            if share > 0:
                done = r["epoch_done"] / share
                progress = f"{_bar(done, 14)} {100 * min(done, 1):3.0f}%"
            name = _clip(f"  rank {r['rank']}/{world}", 16)
            lines.append(_clip(f"{name:<16} {r['state']:<8} {epoch:<7} {progress:<19}", WIDTH))
    return "\n".join(lines) + "\n"
