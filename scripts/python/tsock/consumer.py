"""Reading a mount: a consumer joins, reads its batches in order, leaves."""
from __future__ import annotations

import errno
import os
import secrets
import time
import weakref
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

from tsock.batchfile import Path, load_batch
from tsock import ranks, starting, status
from tsock.control import leave, read_classes, read_text, state
from tsock.errors import GONE, TsockError


class Consumer:
    """One consumer of a tsock mount: joins on creation, leaves on close.

    mount: the mountpoint. name: the consumer's name (a unique one by
    default). batch_size: this consumer's own batch size (the producer's
    by default). Iterating yields every batch of every epoch in order;
    epochs() yields one iterator per epoch. It leaves (rmdir) on close(),
    at the end of a with block, when collected, or at interpreter exit.
    timeout: seconds to wait for any one batch before raising TsockError
    (None: no bound; a producer may be slow for good reasons).
    start_timeout: seconds to wait for a mount that is still starting
    (listing or indexing its source), saying so on stderr (None: no bound).

    rank, world: this process is rank `rank` of a data-parallel training
    of `world` ranks (torch.distributed's numbers; by default RANK and
    WORLD_SIZE from the environment torchrun and Slurm recipes set). The
    ranks join consumer `name` (the same on every rank; by default one
    from torchrun's run id) as one group: each epoch is dealt among them,
    every sample once, each rank the same number of batches of
    batch_size; drop_last drops the uneven tail (fewer than world
    samples) rather than padding it, as DistributedSampler's drop_last.
    """

    def __init__(self, mount: Path, name: Optional[str] = None, batch_size: Optional[int] = None,
                 writable: bool = False, subset: Union[None, str, Sequence[int], np.ndarray] = None,
                 timeout: Optional[float] = None, start_timeout: Optional[float] = starting.START_TIMEOUT,
                 rank: Optional[int] = None, world: Optional[int] = None, drop_last: bool = False) -> None:
        self.mount = os.fspath(mount)
        # timeout: seconds to wait for one batch before giving up (None:
        # as long as it takes). A producer that died (an outside one,
        # under --ingest) leaves a consumer waiting: this says so instead.
        self.timeout = timeout
        # A mount still starting (listing or indexing its source) is
        # waited for, saying so on stderr, for at most start_timeout
        # seconds (None: as long as it takes).
        starting.wait(self.mount, start_timeout)
        consumers = os.path.join(self.mount, "consumers")
        if not os.path.isdir(consumers):
            raise TsockError(f"{self.mount}: a tsock mount without consumers/ (another version's?)")
        self.rank, self.world = ranks.of(rank, world)
        self._alive: Optional[int] = None
        if self.world is not None and self.rank is not None:
            self.name = name or ranks.default_name()
            group = os.path.join(consumers, self.name)
            self.dir = os.path.join(group, str(self.rank))
            # Nothing to undo until it joined: a refused rank must not
            # remove what another rank made.
            self._alive = ranks.join(self.mount, group, self.rank, self.world,
                                     batch_size=batch_size, drop_last=drop_last, subset=subset)
            self._finalizer = weakref.finalize(self, ranks.leave, group, self.dir, self._alive)
        else:
            self.name = name or f"py-{os.getpid()}-{secrets.token_hex(3)}"
            self.dir = os.path.join(consumers, self.name)
            try:
                os.mkdir(self.dir)
            except FileExistsError:
                raise TsockError(f"consumer {self.name!r} already exists in {self.mount}: pick another name") from None
            except OSError as e:
                raise TsockError(f"join {self.mount} as {self.name!r}: {e.strerror} (names: 1-64 of A-Za-z0-9_.-)") from None
            self._finalizer = weakref.finalize(self, leave, self.dir)
            if batch_size is not None:
                try:
                    with open(os.path.join(self.dir, "batch_size"), "w") as f:
                        f.write(f"{int(batch_size)}\n")
                except OSError as e:
                    self.close()
                    raise TsockError(f"batch size {batch_size!r} for {self.name}: {e.strerror}") from None
            if subset is not None:
                try:
                    self.set_subset(subset)
                except TsockError:
                    self.close()
                    raise
        self._suffix = ".safetensors"
        self._load: Callable[[str], Any] = load_batch
        if writable:
            self._load = lambda path: load_batch(path, writable=True)
        self.epoch = None  # the consumer's epoch of the last batch read
        self.meta = None  # the last batch's metadata
        # The dataset indices of the last batch read (a copy: a view would
        # hold the batch), or None where batches carry none or hold them
        # on the GPU.
        self.indices: Optional[np.ndarray] = None
        self._next = 0  # the next batch number to open
        self._pending = None  # a batch read ahead to find an epoch's end
        self._around = False  # it told the daemon it reads around FUSE (read_ahead 0)

    def __repr__(self) -> str:
        if self.world is not None:
            return f"tsock.Consumer({self.mount!r}, name={self.name!r}, rank={self.rank}, world={self.world})"
        return f"tsock.Consumer({self.mount!r}, name={self.name!r})"

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Leaves the mount; batches still alive stay readable."""
        self._pending = None
        self._finalizer()

    def set_subset(self, subset: Union[str, Sequence[int], np.ndarray]) -> None:
        """What this consumer trains on: "all", "fold K/N", "holdout K/N",
        "classes A B ...", or dataset indices (a sequence or an array).
        Before the first batch it applies at once; later, from a coming
        epoch of this consumer's (never inside one). A bad one raises
        TsockError and changes nothing. A group's is fixed once its ranks
        joined: give subset= to every rank instead."""
        if self.world is not None:
            raise TsockError(f"consumer {self.name}: a group's subset is fixed once its ranks joined (give subset= to every rank)")
        if isinstance(subset, str):
            data = (subset.strip() + "\n").encode()
        else:
            data = np.asarray(subset, dtype="<i8").tobytes()  # binary: tsock tells it by its NUL bytes
        try:
            with open(os.path.join(self.dir, "subset"), "wb", buffering=0) as f:
                f.write(data)
        except OSError as e:
            raise TsockError(f"subset {subset if isinstance(subset, str) else f'of {len(data) // 8} indices'!r} "
                             f"for {self.name}: {e.strerror}; see {self.dir}/status") from None

    @property
    def subset(self) -> str:
        """The subset file's form: "all", "fold 2/5", "list of 1200", ..."""
        return read_text(os.path.join(self.dir, "subset")).strip()

    @property
    def classes(self) -> Optional[List[str]]:
        """The source's class names in label order (classes[k] is label
        k's), from MOUNTPOINT/classes: what a model's output layer is sized
        by. None on an --ingest mount, where only the producer knows them."""
        return read_classes(self.mount)

    def status(self) -> Dict[str, Any]:
        """This consumer's entry of MOUNTPOINT/status.json: state, epoch,
        epoch_done of epoch_len, lag_batches, open_batches, wait_share, …"""
        try:
            doc = status.read(self.mount, start_timeout=0)
        except status.StatusError as e:
            raise TsockError(str(e)) from None
        for c in doc["consumers"]:
            if c["name"] == self.name:
                if self.world is not None:  # the group's entry, with this rank's progress
                    return {**c, **next((r for r in c.get("ranks", []) if r["rank"] == self.rank), {})}
                return c
        raise TsockError(f"consumer {self.name} is gone from {self.mount}")

    def _check_end(self) -> None:
        """Called on ENOENT for the next batch: that is the consumer's end,
        unless the consumer is gone or the producer failed."""
        if not os.path.isdir(self.dir):
            raise TsockError(f"consumer {self.name} is gone from {self.mount} (removed from elsewhere?)")
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if state(os.path.join(self.mount, "state")) == "failed":
            try:
                why = status.read(self.mount, start_timeout=0)["state_text"]
            except status.StatusError:
                why = "failed"
            raise TsockError(f"{self.mount}: the producer {why}") from None

    def _await(self, name: str, timeout: float) -> None:
        """Waits, up to self.timeout, until batch name is listed in the
        consumer's directory (published) or the consumer has nothing more
        to wait for; then the open does not block. The listing and the
        state file never block: polled, as no event says a batch came."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if name in os.listdir(self.dir):
                    return
            except OSError:
                return  # the open says what is wrong
            # Nothing more is coming for it, or it is past its end (idle:
            # no consumer needs a sample): the open answers at once.
            if state(os.path.join(self.dir, "state")) in ("done", "evicted", "") or \
                    state(os.path.join(self.mount, "state")) in ("failed", "stopped", "idle", ""):
                return
            if time.monotonic() >= deadline:
                try:
                    why = status.read(self.mount, start_timeout=0)["state_text"]
                except status.StatusError as e:
                    why = str(e)
                raise TsockError(f"consumer {self.name}: no batch in {timeout:g} s (the mount: {why})")
            time.sleep(min(0.05, timeout))

    def _take(self) -> Any:
        """The next batch, or None after the last one."""
        if self._pending is not None:
            b, self._pending = self._pending, None
            return b
        if not self._finalizer.alive:
            raise TsockError(f"consumer {self.name} is closed")
        if self.world is not None and self._next == 0:
            ranks.wait_for_peers(self.dir, self.timeout)
        path = os.path.join(self.dir, "%06d%s" % (self._next, self._suffix))
        if self.timeout is not None:
            self._await(os.path.basename(path), self.timeout)
        try:
            b = self._load(path)
        except FileNotFoundError:
            self._check_end()
            return None
        except OSError as e:
            if e.errno in (errno.EIO, errno.ENODATA):  # ENODATA: every sample was skipped
                if state(os.path.join(self.dir, "state")) == "evicted":
                    why = self.status().get("evicted", "")
                    if self.world is not None:
                        raise ranks.GroupFailed(f"consumer {self.name}, rank {self.rank} of {self.world}: {why}") from None
                    raise TsockError(f"consumer {self.name} was evicted: {why}") from None
                self._raise_if_failed()
            if e.errno == errno.EDEADLK:
                why = self.status().get("deadlock") or "its waits fail with EDEADLK: hold fewer batches at once"
                raise TsockError(f"consumer {self.name}: {path}: a wait that could never end: {why} "
                                 f"(batches kept open or mapped count against the buffer until dropped)") from None
            if e.errno in GONE:
                raise TsockError(f"{self.mount}: the tsock daemon is stopping or gone ({e.strerror}): "
                                 f"consumer {self.name} did not reach its end") from None
            raise TsockError(f"consumer {self.name}: open {path}: {e.strerror}") from None
        self._next += 1
        if getattr(b, "direct", False) and not self._around:
            self._read_around()
        self.epoch, self.meta = b.epoch, b.meta
        idx = b.get("indices")
        # GPU batches keep theirs on the device, in the batch.
        self.indices = np.array(idx) if isinstance(idx, np.ndarray) else None
        return b

    def _read_around(self) -> None:
        """This consumer maps its batches from the daemon's own files,
        around FUSE: the daemon need not read them ahead into the page
        cache (read_ahead 0; a group's, for its ranks). Best effort: where
        the write fails, the read-ahead costs only the daemon's CPU."""
        self._around = True
        consumer = os.path.dirname(self.dir) if self.world is not None else self.dir
        try:
            with open(os.path.join(consumer, "read_ahead"), "wb", buffering=0) as f:
                f.write(b"0\n")
        except OSError:
            pass

    def __iter__(self) -> Iterator[Any]:
        """Every batch of every epoch, in order."""
        while (b := self._take()) is not None:
            yield b.value
            b = None  # hold no batch while opening the next: the buffer may have room for one

    def epochs(self) -> Iterator[Iterator[Any]]:
        """One iterator per epoch of this consumer, in order.

        An epoch ends where the next begins (the first batch of the next
        epoch is read ahead) or at the consumer's end. Moving to the next
        epoch before finishing one consumes the rest of it unread.
        """
        while (epoch := self._next_epoch()) is not None:
            yield epoch
            epoch.drain()
            epoch = None

    def _next_epoch(self) -> Optional["_Epoch"]:
        first = self._take()
        return None if first is None else _Epoch(self, first)


class _Epoch:
    """The batches of one epoch of a consumer."""

    def __init__(self, consumer: Consumer, first: Any) -> None:
        self.consumer = consumer
        self.number = first.epoch
        self._first = first
        self._over = False

    def __iter__(self) -> "_Epoch":
        return self

    def __next__(self) -> Any:
        if self._first is not None:
            b, self._first = self._first, None
            return b.value
        if self._over:
            raise StopIteration
        b = self.consumer._take()
        if b is None or b.epoch != self.number:
            self.consumer._pending = b
            self._over = True
            raise StopIteration
        return b.value

    def drain(self) -> None:
        """Consumes the rest of the epoch unread."""
        for _ in self:
            pass
