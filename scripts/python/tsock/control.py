"""A mount's control files, as cgroupfs and sysfs have them: one value per
file, newline-terminated. The client decides only on these (state, refusal,
classes, status.json), never on the prose of a status file."""
from __future__ import annotations

import ast
import os
from typing import List, Optional

from tsock.batchfile import Path


def read_text(path: Path) -> str:
    """A control file's text. tsock escapes what it prints; a non-UTF-8
    byte must still not stop a reader."""
    with open(path, errors="backslashreplace") as f:
        return f.read()


def state(path: Path) -> str:
    """A state file's one word (the mount's or a consumer's); "" if it
    cannot be read. Decisions read these, never the prose of status."""
    try:
        return read_text(path).strip()
    except OSError:
        return ""


def leave(path: Path) -> None:
    """Leaves a consumer directory (rmdir); quiet if it is gone."""
    try:
        os.rmdir(path)
    except OSError:
        pass  # gone already, or the mount is


def read_classes(mount: Path) -> Optional[List[str]]:
    """MOUNTPOINT/classes as a list, or None where the mount has none
    (--ingest). A name with a control character is written Go-quoted
    there, which a Python string literal reads the same."""
    try:
        with open(os.path.join(os.fspath(mount), "classes"), encoding="utf-8") as f:
            lines = f.read().split("\n")[:-1]
    except FileNotFoundError:
        return None
    return [ast.literal_eval(n) if n.startswith('"') else n for n in lines]
