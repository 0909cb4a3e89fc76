"""Waiting for a mount that is starting.

`tsock mount ... &` returns at once; a consumer started right after it
finds the mountpoint empty for a moment (before the daemon mounts
anything), then a starting mount (MOUNTPOINT/starting, one file saying
how far listing or indexing the source got: seconds for a folder of a
million files, minutes for a bucket's first index), then the mount
itself (status.json, consumers/). wait() waits through all of it, saying
on stderr what it waits for, and raises only where no mount is coming.
"""
from __future__ import annotations

import errno
import os
import sys
import time
from typing import Callable, Optional

from tsock.errors import GONE, TsockError

#: How long a starting mount is waited for by default: a bucket's first
#: index takes minutes.
START_TIMEOUT = 600.0
#: How long an empty directory that is not (yet) a mount point is waited
#: for: `tsock mount` puts its starting mount there within moments. A
#: directory with files in it is no mountpoint to wait for.
GRACE = 5.0
_POLL = 0.05


def _say(line: str) -> None:
    print(f"tsock: {line}", file=sys.stderr, flush=True)


def _starting_line(mount: str) -> Optional[str]:
    """What MOUNTPOINT/starting says the daemon is doing, or None where
    there is no such file."""
    try:
        with open(os.path.join(mount, "starting"), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    doing = [line for line in lines if line.startswith("opening for ")]
    return doing[0] if doing else (lines[0] if lines else "starting")


def wait(mount: str, timeout: Optional[float] = START_TIMEOUT, say: Callable[[str], None] = _say,
         grace: float = GRACE, error: type = TsockError) -> None:
    """Returns once mount serves (status.json is there). Waits while it is
    starting (at most timeout seconds; None: as long as it takes) and,
    for grace seconds, while it is an empty directory not yet mounted.
    Raises error, in one line, for anything else: no such directory, a
    directory that is not a tsock mount, a daemon that is gone, another
    user's mount, or a start that outlasts timeout."""
    began = time.monotonic()
    unmounted_since: Optional[float] = None  # when the directory was last seen plain
    said = ""
    said_at = 0.0
    while True:
        try:
            if os.path.isfile(os.path.join(mount, "status.json")):
                return
            os.listdir(mount)
        except FileNotFoundError:
            raise error(f"{mount}: no such file or directory") from None
        except PermissionError:
            raise error(f"{mount}: permission denied (a mount is its owner's; mount with --allow-other to show it to others)") from None
        except OSError as e:
            if e.errno in GONE:
                raise error(f"{mount}: the tsock daemon is gone ({e.strerror}); umount {mount}") from None
            if e.errno == errno.ENOTDIR:
                raise error(f"{mount}: not a directory") from None
            raise error(f"{mount}: {e.strerror}") from None
        now = time.monotonic()
        line = _starting_line(mount)
        if line is not None:
            unmounted_since = None
            what = f"{mount} is starting: {line}"
            # Say it when it says something new (the elapsed time aside),
            # and every 10 s.
            key = line.split(":", 1)[-1]
            if key != said or now - said_at >= 10:
                say(f"waiting for {what}")
                said, said_at = key, now
            if timeout is not None and now - began >= timeout:
                raise error(f"{mount}: still starting after {timeout:.0f} s ({line}); wait longer (start_timeout) or look at `tsock status {mount}`")
        elif os.path.ismount(mount) or os.listdir(mount):
            raise error(f"{mount} is not a tsock mount (no status.json): is `tsock mount` running?")
        else:
            if unmounted_since is None:
                unmounted_since = now
                if said == "":
                    say(f"waiting up to {grace:.0f} s for {mount} to be mounted (`tsock mount` starting?)")
                    said, said_at = "unmounted", now
            if now - unmounted_since >= grace:
                raise error(f"{mount} is not a tsock mount (an empty directory, nothing mounted there for {grace:.0f} s): is `tsock mount` running?")
        time.sleep(_POLL)  # nothing announces a mount: look again shortly
