"""Data-parallel ranks: the processes of one training (torch DDP) join one
consumer as a group and are dealt each epoch between them.

The files (cgroupfs style): consumers/NAME/world makes NAME a group of
that many ranks; its batch_size (each rank's), drop_last and subset are
the group's, fixed once a rank joined; mkdir consumers/NAME/R claims rank
R; consumers/NAME/R/ holds the rank's batches as a consumer's directory
does, and its alive file, which this client holds open while it reads:
the kernel closes it when the process dies, however it dies, and the
group fails at once (every rank's next read raises) rather than hanging.
"""
from __future__ import annotations

import errno
import os
import sys
import time
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from tsock import status
from tsock.control import read_text
from tsock.errors import TsockError

# How long a rank waits for the others to join before it gives up: the
# ranks of a DDP job start within seconds of each other (their
# init_process_group waits for all of them first).
PEER_TIMEOUT = 300.0


class GroupFailed(TsockError):
    """A rank of this group left before its end, or stalled: no rank of
    it can take another step (DDP would hang in its next all-reduce)."""


def of(rank: Optional[int], world: Optional[int]) -> Tuple[Optional[int], Optional[int]]:
    """This process's rank and world: as given, else torch.distributed's
    environment (RANK, WORLD_SIZE, as torchrun sets them), else None (a
    consumer of its own)."""
    if world is None and rank is None and "WORLD_SIZE" in os.environ and "RANK" in os.environ:
        try:
            rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        except ValueError:
            raise TsockError(f"RANK={os.environ['RANK']!r}, WORLD_SIZE={os.environ['WORLD_SIZE']!r}: not numbers") from None
    if world is None and rank is None:
        return None, None
    if world is None or rank is None:
        raise TsockError(f"rank={rank!r}, world={world!r}: give both, or neither")
    if not (isinstance(rank, int) and isinstance(world, int)) or world < 1 or not 0 <= rank < world:
        raise TsockError(f"rank {rank!r} of world {world!r}: a rank is 0 to world-1")
    return rank, world


def default_name() -> str:
    """The group's name every rank of one launch agrees on: torchrun's run
    id, else the rendezvous address."""
    run = os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("SLURM_JOB_ID")
    if not run and os.environ.get("MASTER_PORT"):
        run = f"{os.environ.get('MASTER_ADDR', 'localhost')}-{os.environ['MASTER_PORT']}"
    if not run:
        raise TsockError("a group's ranks must agree on its name: give name= (the same on every rank)")
    return "ddp-" + "".join(c if c.isalnum() or c in "_.-" else "-" for c in run)[:60]


def _write(path: str, value: bytes, what: str, group: str) -> None:
    try:
        with open(path, "wb", buffering=0) as f:
            f.write(value)
    except OSError as e:
        have = ""
        try:
            have = read_text(path).strip()
        except OSError:
            pass
        if e.errno in (errno.EINVAL, errno.EBUSY) and have:
            raise TsockError(f"group {os.path.basename(group)}: this rank asks {what} {value.decode(errors='replace').strip()!r}, "
                             f"the group has {have!r} (the ranks disagree)") from None
        raise TsockError(f"group {os.path.basename(group)}: {what}: {e.strerror}") from None


def node_of(mount: str) -> Tuple[int, int, str]:
    """The mount's node among those of trials that span several: (index,
    count, fingerprint), (0, 1, "") on one node (status.json's node)."""
    node = status.read(mount).get("node") or {}
    return int(node.get("index", 0)), int(node.get("count", 1)), str(node.get("fingerprint", ""))


def check_nodes(rank: int, world: int, mine: Tuple[int, int, str], gathered: Sequence[Tuple[int, int, str]]) -> None:
    """Refuses ranks whose mounts cannot serve one trial together: every
    rank's mount must say the same node count and fingerprint (one
    source, seed and dataset), and rank r's must be node r // (world /
    count), the node that serves it. gathered is every rank's
    (index, count, fingerprint), by rank; mine is this rank's."""
    counts = sorted({g[1] for g in gathered})
    if len(counts) > 1:
        raise TsockError(f"the ranks' mounts disagree on the node count: {', '.join(f'rank {r}: {g[1]}' for r, g in enumerate(gathered))}")
    count = counts[0]
    if world % count:
        raise TsockError(f"world {world} over {count} nodes: each node serves as many ranks (a multiple of {count})")
    prints = {g[2] for g in gathered}
    if len(prints) > 1:
        by = ", ".join(f"rank {r} (node {g[0]}): {g[2] or 'none'}" for r, g in enumerate(gathered))
        raise TsockError(f"the nodes' mounts disagree on the source, seed or node count (their fingerprints differ): {by}")
    per = world // count
    wrong = [f"rank {r} on node {g[0]} (node {r // per} serves it)" for r, g in enumerate(gathered) if g[0] != r // per]
    if wrong:
        raise TsockError(f"ranks on the wrong node's mount: {', '.join(wrong)}; node K of {count} serves ranks K·{per} to K·{per}+{per - 1}")
    if mine != tuple(gathered[rank]):
        raise TsockError(f"rank {rank}: gathered {gathered[rank]!r}, this rank has {mine!r}")


def agree_across_nodes(mount: str, rank: int, world: int) -> None:
    """Where torch.distributed is initialized (the ranks of a DDP job),
    every rank learns every other's node and checks them (check_nodes)
    before any joins: each rank computes the same verdict from the same
    gathered list, so all raise together and none waits for a rank that
    raised. Without torch.distributed, each mount's own checks stand (a
    rank the node does not serve is refused at its mkdir)."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    mine = node_of(mount)
    if dist.get_world_size() != world or dist.get_rank() != rank:
        raise TsockError(f"rank {rank} of world {world}: torch.distributed says rank {dist.get_rank()} of {dist.get_world_size()}")
    gathered: List[Any] = [None] * world
    dist.all_gather_object(gathered, mine)
    check_nodes(rank, world, mine, [(int(g[0]), int(g[1]), str(g[2])) for g in gathered])


def join(mount: str, group: str, rank: int, world: int, batch_size: Optional[int], drop_last: bool,
         subset: Union[None, str, Sequence[int], np.ndarray]) -> int:
    """Joins group as rank of world and returns the alive file's fd."""
    agree_across_nodes(mount, rank, world)
    try:
        os.mkdir(group)
    except FileExistsError:
        pass  # another rank made it
    except OSError as e:
        raise TsockError(f"join {mount} as {os.path.basename(group)!r}: {e.strerror} (names: 1-64 of A-Za-z0-9_.-)") from None
    _write(os.path.join(group, "world"), f"{world}\n".encode(), "world", group)
    if batch_size is not None:
        _write(os.path.join(group, "batch_size"), f"{int(batch_size)}\n".encode(), "batch_size", group)
    _write(os.path.join(group, "drop_last"), b"1\n" if drop_last else b"0\n", "drop_last", group)
    if subset is not None:
        if isinstance(subset, str):
            data = (subset.strip() + "\n").encode()
        else:
            data = np.asarray(subset, dtype="<i8").tobytes()
        _write(os.path.join(group, "subset"), data, "subset", group)
    me = os.path.join(group, str(rank))
    try:
        os.mkdir(me)
    except FileExistsError:
        raise TsockError(f"rank {rank} of {os.path.basename(group)} is claimed already: "
                         f"two ranks with one number, or a group left from another run (rmdir {me})") from None
    except OSError as e:
        raise TsockError(f"rank {rank} of {os.path.basename(group)} (world {world}): {e.strerror}") from None
    fd = os.open(os.path.join(me, "alive"), os.O_RDONLY | os.O_CLOEXEC)
    # What every rank asked must be what the group has: a rank that wrote
    # another value before the first claim changed it for all.
    try:
        _agree(group, "batch_size", None if batch_size is None else str(int(batch_size)))
        _agree(group, "drop_last", "1" if drop_last else "0")
        _agree(group, "world", str(world))
        if isinstance(subset, str):
            _agree(group, "subset", subset.strip())
    except TsockError:
        leave(group, me, fd)
        raise
    return fd


def _agree(group: str, name: str, want: Optional[str]) -> None:
    if want is None:
        return
    have = read_text(os.path.join(group, name)).strip()
    if have != want and not (name == "subset" and " ".join(want.split()) == have):
        raise TsockError(f"group {os.path.basename(group)}: this rank asked {name} {want!r}, the group has {have!r} "
                         f"(the ranks disagree)")


def leave(group: str, me: str, fd: Optional[int]) -> None:
    """Leaves: closes alive, removes the rank's directory, and the group's
    once no rank is left (quiet where another rank still has it)."""
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
    for path in (me, group):
        try:
            os.rmdir(path)
        except OSError:
            pass


def wait_for_peers(rank_dir: str, timeout: Optional[float]) -> None:
    """Waits, up to timeout (PEER_TIMEOUT by default), until every rank of
    the group has joined; says on stderr which it waits for."""
    group = os.path.dirname(rank_dir)
    mount = os.path.dirname(os.path.dirname(group))
    name = os.path.basename(group)
    bound = PEER_TIMEOUT if timeout is None else timeout
    said = time.monotonic()
    deadline = said + bound
    while True:
        missing = _missing(mount, name)
        if not missing:
            return
        now = time.monotonic()
        if now >= deadline:
            raise GroupFailed(f"group {name}: ranks {missing} did not join in {bound:g} s")
        if now - said > 10:
            print(f"tsock: group {name}: waiting for ranks {missing} to join", file=sys.stderr)
            said = now
        time.sleep(0.05)


def _missing(mount: str, name: str) -> List[Any]:
    try:
        doc = status.read(mount, start_timeout=0)
    except status.StatusError:
        return []  # the read says what is wrong
    for c in doc["consumers"]:
        if c["name"] == name:
            return list(c.get("missing") or [])
    return []
