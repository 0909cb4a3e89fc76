"""Producers: any pipeline publishes batches through a mount made with
`tsock mount --ingest`."""
from __future__ import annotations

import errno
import itertools
import json
import os
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, cast

import numpy as np

from tsock.batchfile import STRUCTURE, Path, flatten, write_batch
from tsock.control import read_text
from tsock.errors import GONE, MountClosed, TsockError


class Producer:
    """Publishes batches into a mount made with `tsock mount --ingest`.

    publish() writes one batch file into ingest/, tensor buffers straight
    into the mount's memory (no copy of the batch in Python); it blocks
    while the buffer is full. order() (ordered mode, --samples) waits
    until some consumer needs samples and returns (epoch, position,
    indices) to make next; each published batch must carry those indices,
    in order. skip() says samples could not be made.
    """

    def __init__(self, mount: Path) -> None:
        self.mount = os.fspath(mount)
        self.dir = os.path.join(self.mount, "ingest")
        if not os.path.isfile(os.path.join(self.dir, "next")):
            raise TsockError(f"{self.mount}: no ingest/ here: mount it with `tsock mount --ingest`")

    def next(self) -> int:
        """The next batch number (ingest/next)."""
        try:
            with open(os.path.join(self.dir, "next")) as f:
                return int(f.read())
        except OSError as e:
            raise self._error(e, "read ingest/next") from None

    def order(self) -> Tuple[int, int, List[int]]:
        """(epoch, position, [dataset indices]) to make next; blocks.
        epoch_length is then the number of samples in that epoch's order."""
        try:
            with open(os.path.join(self.dir, "order")) as f:
                vals = f.read().split()
        except OSError as e:
            raise self._error(e, "read ingest/order") from None
        epoch, position, count, self.epoch_length = (int(v) for v in vals[:4])
        return epoch, position, [int(v) for v in vals[4 : 4 + count]]

    def skip(self, indices: Iterable[int]) -> None:
        """The next indices of the order could not be made."""
        if indices:
            try:
                with open(os.path.join(self.dir, "skip"), "w") as f:
                    f.write(" ".join(str(int(i)) for i in indices) + "\n")
            except OSError as e:
                raise self._error(e, "write ingest/skip") from None

    def publish(self, batch: Any, epoch: Optional[int] = None, last: bool = False,
                indices: Optional[Sequence[int]] = None) -> int:
        """Writes batch as the next batch file. epoch marks the producer's
        epoch (unordered mode); last=True ends it with this batch; indices
        are the samples' dataset indices (required in ordered mode)."""
        tensors, kind = flatten(batch)
        if indices is not None and not any(name == "indices" for name, _, _ in tensors):
            tensors.append(("indices", np.asarray(indices, np.int64), "I64"))
        meta = {STRUCTURE: json.dumps(kind, separators=(",", ":"))}
        if epoch is not None:
            meta["epoch"] = str(epoch)
        if last:
            meta["last"] = "true"
        seq = self.next()
        path = os.path.join(self.dir, "%06d.safetensors" % seq)
        try:
            write_batch(path, tensors, meta)
        except OSError as e:
            raise self._error(e, f"publish {path}") from None
        return seq

    def _error(self, e: OSError, what: str) -> TsockError:
        """The exception for an OSError of an ingest/ file: MountClosed when
        the daemon stops, else the errno with ingest/status's reason."""
        if e.errno in GONE or (e.errno == errno.ENOENT and not _mounted(self.mount)):
            # ENOENT where the mount was: it is gone (unmounted at the
            # daemon's SIGTERM), which is the mount closing, as GONE is.
            return MountClosed(f"{self.mount}: the tsock daemon stopped ({e.strerror})")
        if e.errno == errno.ENODATA:
            return TsockError(f"{self.mount}: {what}: no samples left: every sample of the dataset was skipped "
                              f"(see ingest/status)")
        try:  # ingest/refusal: the last refusal, one line, for programs
            why = read_text(os.path.join(self.dir, "refusal")).strip() or "see ingest/status"
        except OSError:
            why = "ingest/refusal unreadable"
        return TsockError(f"{self.mount}: {what}: {e.strerror}: {why}")


def _mounted(mount: str) -> bool:
    """Whether mount is still a tsock mount (its status file is there)."""
    return os.path.isfile(os.path.join(mount, "status"))


def serve(mount: Path, dataset: Any, batch_size: int = 256, num_workers: int = 0,
          collate_fn: Optional[Callable[[List[Any]], Any]] = None, epochs: Optional[int] = None,
          **dataloader_kwargs: Any) -> None:
    """Shares any map-style PyTorch dataset through a mount made with
    `tsock mount --ingest --samples len(dataset)`: a DataLoader whose
    batch sampler is tsock's order, publishing every batch. A sample whose
    __getitem__ raises is skipped (tsock counts it and leaves it out of
    later epochs); when every sample is, it raises TsockError, as the
    consumers do: no run reports success for epochs it could not make.
    Returns after `epochs` producer epochs if given, else
    when the mount stops (the daemon's SIGTERM or unmount): a late joiner
    can always ask for more, so there is no other natural end.
    """
    try:
        _serve(Producer(mount), dataset, batch_size, num_workers, collate_fn, epochs, dataloader_kwargs)
    except MountClosed:
        pass


def _serve(p: Producer, dataset: Any, batch_size: int, num_workers: int, collate_fn: Optional[Callable[[List[Any]], Any]],
           epochs: Optional[int], dataloader_kwargs: Dict[str, Any]) -> None:
    import torch.utils.data as tud

    collate = collate_fn or tud.default_collate
    done = 0
    while epochs is None or done < epochs:
        epoch, position, indices = p.order()
        if not indices:
            continue
        # One DataLoader per order read: a whole epoch when every consumer
        # needs all of it, so workers start once an epoch.
        sampler = [indices[i : i + batch_size] for i in range(0, len(indices), batch_size)]
        loader: Any = tud.DataLoader(cast(Any, _Indexed(dataset)), batch_sampler=sampler, num_workers=num_workers,
                                collate_fn=lambda items: _collate(items, collate), **dataloader_kwargs)
        bad = []
        for batch, good, failed in loader:
            bad += failed
            if good:
                p.publish(batch, indices=good)
                bad = []  # skipped implicitly: the published indices passed them
        p.skip(bad)
        if position + len(indices) == p.epoch_length:
            done += 1


class _Indexed:
    """dataset[i] as (i, sample), or (i, None) if it cannot be made."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> Tuple[int, Any]:
        try:
            return i, self.dataset[i]
        except Exception:  # a bad sample is skipped, not fatal
            return i, None


def _collate(items: List[Tuple[int, Any]], collate: Callable[[List[Any]], Any]) -> Tuple[Any, List[int], List[int]]:
    """A batch of the samples made, their indices, and those that failed."""
    good = [i for i, x in items if x is not None]
    failed = [i for i, x in items if x is None]
    batch = collate([x for _, x in items if x is not None]) if good else None
    return batch, good, failed


def serve_iterable(mount: Path, iterable: Iterable[Any], epochs: Optional[int] = 1) -> None:
    """Shares any iterable of batches (an existing DataLoader, a JAX or TF
    pipeline yielding numpy) through a mount made with `tsock mount
    --ingest` (unordered mode): `epochs` passes over it (None: for as long
    as the mount serves), each marked as one epoch for the consumers.
    Returns early if the mount stops."""
    p = Producer(mount)
    try:
        for epoch in itertools.count() if epochs is None else range(epochs):
            prev = None
            for batch in iterable:
                if prev is not None:
                    p.publish(prev, epoch=epoch)
                prev = batch
            if prev is not None:
                p.publish(prev, epoch=epoch, last=True)
    except MountClosed:
        pass
