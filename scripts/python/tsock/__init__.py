"""Read a tsock mount from Python: the standard library and numpy only.

    import tsock
    for batch in tsock.Consumer("/mnt/tsock"):          # joins, reads, leaves
        images, labels = batch["images"], batch["labels"]   # numpy, zero copy

    with tsock.Consumer("/mnt/tsock", batch_size=64) as c:
        for epoch in c.epochs():                          # one iterator per epoch
            for batch in epoch:
                ...

    loader = tsock.torch_loader("/mnt/tsock", device="cuda", mean=MEAN, std=STD)
    for epoch in range(EPOCHS):
        for images, labels in loader:                     # one epoch per loop
            ...

Install it from a tsock checkout (it needs only numpy; torch and CuPy
when their functions are called):

    pip install scripts/python
    # Debian, whose interpreter is externally managed: a venv that sees
    # the system's numpy and torch
    python3 -m venv --system-site-packages ~/.venvs/tsock
    ~/.venvs/tsock/bin/pip install scripts/python

    python3 -m tsock status /mnt/tsock        # the view `tsock status` draws

A batch is a dict {"images", "labels", "indices"} of numpy arrays that view
the batch file's memory mapping: read-only (Consumer(writable=True) maps
copy-on-write instead). The mapping keeps the file open, so the batch stays held in the
shared buffer for as long as any of its arrays lives; drop them and it is
consumed. Keeping every batch of an epoch alive holds the buffer full and
stalls every consumer.
"""
from __future__ import annotations

import ast
import errno
import json
import mmap
import os
import secrets
import struct
import weakref
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from tsock import status

__all__ = ["Batch", "Consumer", "MountClosed", "Producer", "Ragged", "TsockError", "cuda_batches", "load_batch", "serve",
           "serve_iterable", "status", "torch_loader"]

#: A mountpoint or a file in it.
Path = Union[str, "os.PathLike[str]"]

# safetensors dtypes as numpy reads them. numpy has no bfloat16: BF16
# arrives as its uint16 bits (torch_loader makes torch.bfloat16 of them).
DTYPES = {"U8": np.uint8, "I8": np.int8, "I16": np.int16, "I32": np.int32, "I64": np.int64, "BOOL": np.bool_,
          "F16": np.float16, "F32": np.float32, "F64": np.float64, "BF16": np.uint16}
NAMES = {np.dtype(v): k for k, v in DTYPES.items() if k != "BF16"}
HEADER_LIMIT = 1 << 20
PAGE = 4096
STRUCTURE = "tsock.structure"  # metadata key: how a published batch was shaped


class TsockError(Exception):
    """The mount, the consumer or a batch file is not what it should be."""


class MountClosed(TsockError):
    """The tsock daemon is stopping or gone: a producer's work is over."""


# errnos of a mount whose daemon stops (ESHUTDOWN) or is gone.
_GONE = (errno.ESHUTDOWN, errno.ENOTCONN, errno.ECONNABORTED)


class Batch(dict):
    """One batch: a dict of numpy arrays, with the file's metadata.

    epoch is the consumer's own epoch, index the batch's number in it;
    size is the file's length. A ragged tensor x (with x.offsets) is a
    Ragged. value is the batch in the structure its producer published
    (a dict, or a tuple), without tsock's own "indices" if it added them.
    """

    def __init__(self, tensors: Dict[str, Any], meta: Dict[str, str], path: str, size: int = 0) -> None:
        super().__init__(_join_ragged(tensors))
        self.meta = meta
        self.path = path
        self.size = size
        self.epoch = int(meta.get("epoch", 0))
        self.index = int(meta.get("batch", 0))
        self.dtypes = meta.pop("_dtypes", {})

    @property
    def value(self) -> Union["Batch", Dict[str, Any], Tuple[Any, ...]]:
        """The batch in the structure its producer published."""
        shape = self.meta.get(STRUCTURE)
        if shape is None:
            return self
        shape = json.loads(shape)
        if shape["kind"] == "tuple":
            return tuple(self[str(i)] for i in range(shape["len"]))
        return {k: self[k] for k in shape["keys"]}


class Ragged:
    """A tensor whose samples vary in length: sample i is
    values[offsets[i]:offsets[i+1]] (zero copy)."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray) -> None:
        self.values, self.offsets = values, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self):
        return f"tsock.Ragged({len(self)} samples, {len(self.values)} values of {self.values.dtype})"


def _join_ragged(tensors):
    out = {}
    for name, t in tensors.items():
        if name.endswith(".offsets") and name[: -len(".offsets")] in tensors:
            continue
        off = tensors.get(name + ".offsets")
        out[name] = Ragged(t, off) if off is not None else t
    return out


def load_batch(path: Path, writable: bool = False) -> Batch:
    """Maps one batch file and returns it as a Batch, zero copy.

    The arrays are read-only views of the shared mapping; writable=True
    maps copy-on-write instead (writes stay private; first reads are
    slower under load). Opening a batch that is not produced yet blocks
    until it is; a batch past the consumer's end raises FileNotFoundError.
    A file that is not a tsock batch raises TsockError.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size < 8:
            raise TsockError(f"{path}: {size} bytes: not a tsock batch (no safetensors header)")
        # mmap keeps a duplicate of fd: the file stays open, and the batch
        # held, until the mapping is gone.
        if writable:
            m = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        else:
            m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    tensors, meta = _parse(path, m, size)
    return Batch(tensors, meta, path, size)


def _parse(path, m, size):
    """Checks a safetensors header and makes the arrays over m."""
    (n,) = struct.unpack("<Q", m[:8])
    if n < 2 or n > min(HEADER_LIMIT, size - 8):
        raise TsockError(f"{path}: header length {n} in a {size}-byte file: not a tsock batch")
    try:
        header = json.loads(bytes(m[8 : 8 + n]))
    except ValueError as e:
        raise TsockError(f"{path}: header is not JSON ({e}): not a tsock batch") from None
    if not isinstance(header, dict):
        raise TsockError(f"{path}: header is not a JSON object: not a tsock batch")
    meta = header.pop("__metadata__", None) or {}
    if not header:
        raise TsockError(f"{path}: no tensors: not a tsock batch")
    tensors = {}
    meta["_dtypes"] = {name: t.get("dtype") for name, t in header.items() if isinstance(t, dict)}
    for name, t in header.items():
        try:
            dtype = np.dtype(DTYPES[t["dtype"]])
            shape = [int(d) for d in t["shape"]]
            start, end = (int(x) for x in t["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise TsockError(f"{path}: tensor {name!r}: bad entry {t!r}") from None
        count = int(np.prod(shape))
        if start < 0 or end != start + count * dtype.itemsize or 8 + n + end > size:
            raise TsockError(f"{path}: tensor {name!r}: bytes {start}..{end} do not fit shape {shape} in the file")
        tensors[name] = np.frombuffer(m, dtype, count, 8 + n + start).reshape(shape)
    return tensors, meta


def _read_text(path):
    """A control file's text. tsock escapes what it prints; a non-UTF-8
    byte must still not stop a reader."""
    with open(path, errors="backslashreplace") as f:
        return f.read()


def _read_status(path, what):
    """A status file as a dict of its "key: value" lines."""
    try:
        text = _read_text(path)
    except OSError as e:
        raise TsockError(f"{what}: status unreadable ({e.strerror}): did it leave, or the mount go?") from None
    return dict(line.strip().split(": ", 1) for line in text.splitlines() if ": " in line)


def _state(path):
    """A state file's one word (the mount's or a consumer's); "" if it
    cannot be read. Decisions read these, never the prose of status."""
    try:
        return _read_text(path).strip()
    except OSError:
        return ""


def _leave(path):
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


class Consumer:
    """One consumer of a tsock mount: joins on creation, leaves on close.

    mount: the mountpoint. name: the consumer's name (a unique one by
    default). batch_size: this consumer's own batch size (the producer's
    by default). Iterating yields every batch of every epoch in order;
    epochs() yields one iterator per epoch. It leaves (rmdir) on close(),
    at the end of a with block, when collected, or at interpreter exit.
    """

    def __init__(self, mount: Path, name: Optional[str] = None, batch_size: Optional[int] = None,
                 writable: bool = False, subset: Union[None, str, Sequence[int], np.ndarray] = None) -> None:
        self.mount = os.fspath(mount)
        consumers = os.path.join(self.mount, "consumers")
        if not os.path.isfile(os.path.join(self.mount, "status")) or not os.path.isdir(consumers):
            raise TsockError(f"{self.mount}: not a tsock mount (no status file or consumers/): is `tsock mount` running?")
        self.name = name or f"py-{os.getpid()}-{secrets.token_hex(3)}"
        self.dir = os.path.join(consumers, self.name)
        try:
            os.mkdir(self.dir)
        except FileExistsError:
            raise TsockError(f"consumer {self.name!r} already exists in {self.mount}: pick another name") from None
        except OSError as e:
            raise TsockError(f"join {self.mount} as {self.name!r}: {e.strerror} (names: 1-64 of A-Za-z0-9_.-)") from None
        self._finalizer = weakref.finalize(self, _leave, self.dir)
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
        self._load = (lambda path: load_batch(path, writable=True)) if writable else load_batch
        self.epoch = None  # the consumer's epoch of the last batch read
        self.meta = None  # the last batch's metadata
        # The dataset indices of the last batch read (a copy: a view would
        # hold the batch), or None where batches carry none or hold them
        # on the GPU.
        self.indices = None
        self._next = 0  # the next batch number to open
        self._pending = None  # a batch read ahead to find an epoch's end

    def __repr__(self):
        return f"tsock.Consumer({self.mount!r}, name={self.name!r})"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
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
        TsockError and changes nothing."""
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
        return _read_text(os.path.join(self.dir, "subset")).strip()

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
            doc = status.read(self.mount)
        except status.StatusError as e:
            raise TsockError(str(e)) from None
        for c in doc["consumers"]:
            if c["name"] == self.name:
                return c
        raise TsockError(f"consumer {self.name} is gone from {self.mount}")

    def _check_end(self):
        """Called on ENOENT for the next batch: that is the consumer's end,
        unless the consumer is gone or the producer failed."""
        if not os.path.isdir(self.dir):
            raise TsockError(f"consumer {self.name} is gone from {self.mount} (removed from elsewhere?)")
        self._raise_if_failed()

    def _raise_if_failed(self):
        if _state(os.path.join(self.mount, "state")) == "failed":
            try:
                why = status.read(self.mount)["state_text"]
            except status.StatusError:
                why = "failed"
            raise TsockError(f"{self.mount}: the producer {why}") from None

    def _take(self):
        """The next batch, or None after the last one."""
        if self._pending is not None:
            b, self._pending = self._pending, None
            return b
        if not self._finalizer.alive:
            raise TsockError(f"consumer {self.name} is closed")
        path = os.path.join(self.dir, "%06d%s" % (self._next, self._suffix))
        try:
            b = self._load(path)
        except FileNotFoundError:
            self._check_end()
            return None
        except OSError as e:
            if e.errno in (errno.EIO, errno.ENODATA):  # ENODATA: every sample was skipped
                if _state(os.path.join(self.dir, "state")) == "evicted":
                    why = self.status().get("evicted", "")
                    raise TsockError(f"consumer {self.name} was evicted: {why}") from None
                self._raise_if_failed()
            if e.errno == errno.EDEADLK:
                why = self.status().get("deadlock") or "its waits fail with EDEADLK: hold fewer batches at once"
                raise TsockError(f"consumer {self.name}: {path}: a wait that could never end: {why} "
                                 f"(batches kept open or mapped count against the buffer until dropped)") from None
            if e.errno in _GONE:
                raise TsockError(f"{self.mount}: the tsock daemon is stopping or gone ({e.strerror}): "
                                 f"consumer {self.name} did not reach its end") from None
            raise TsockError(f"consumer {self.name}: open {path}: {e.strerror}") from None
        self._next += 1
        self.epoch, self.meta = b.epoch, b.meta
        idx = b.get("indices")
        # GPU batches keep theirs on the device, in the batch.
        self.indices = np.array(idx) if isinstance(idx, np.ndarray) else None
        return b

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

    def _next_epoch(self):
        first = self._take()
        return None if first is None else _Epoch(self, first)


class _Epoch:
    """The batches of one epoch of a consumer."""

    def __init__(self, consumer, first):
        self.consumer = consumer
        self.number = first.epoch
        self._first = first
        self._over = False

    def __iter__(self):
        return self

    def __next__(self):
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


def torch_loader(mount: Path, device: Any = "cpu", mean: Optional[Sequence[float]] = None,
                 std: Optional[Sequence[float]] = None, dtype: Any = "float32", name: Optional[str] = None,
                 batch_size: Optional[int] = None, subset: Any = None) -> "TorchLoader":
    """A drop-in for a torch DataLoader over a tsock mount.

    Each pass over it (`for images, labels in loader`) is one epoch of its
    consumer; a pass after the last epoch raises TsockError rather than
    being silently empty. images come as NCHW tensors on device, converted
    to dtype and scaled to [0, 1] there, then normalized by mean and std
    (per channel) if given; dtype=None keeps uint8 and skips both. labels
    are int64 tensors on device.
    """
    # uint8 tensors that view the file need a writable (private) mapping:
    # torch ignores read-only flags, and an in-place op would crash.
    consumer = Consumer(mount, name=name, batch_size=batch_size, writable=dtype is None, subset=subset)
    return TorchLoader(consumer, device, mean, std, dtype)


def kfold(train_mount: Path, eval_mount: Path, k: int, n: int, **kwargs: Any) -> Tuple["TorchLoader", "TorchLoader"]:
    """K-fold cross-validation's two loaders for fold k of n: training on
    every sample not in fold k of train_mount, evaluating on fold k of
    eval_mount (a `--transform eval` mount of the same source and seed:
    the folds are the same samples on both). kwargs go to torch_loader."""
    train = torch_loader(train_mount, subset=f"fold {k}/{n}", **kwargs)
    try:
        return train, torch_loader(eval_mount, subset=f"holdout {k}/{n}", **kwargs)
    except BaseException:
        train.consumer.close()
        raise


class TorchLoader:
    """See torch_loader."""

    def __init__(self, consumer, device, mean, std, dtype):
        import torch

        self.torch = torch
        self.consumer = consumer
        self.device = torch.device(device)
        self.dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        self.mean = self._channels(mean)
        self.std = self._channels(std)
        self._epochs = consumer.epochs()
        if self.dtype is not None:
            # The uint8 view of a read-only mapping is only ever read here.
            import warnings

            warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)

    def _channels(self, v):
        if v is None:
            return None
        if self.dtype is None:
            raise TsockError("mean/std need a float dtype")
        return self.torch.as_tensor(v, dtype=self.dtype, device=self.device).reshape(1, -1, 1, 1)

    def __iter__(self):
        try:
            epoch = next(self._epochs)
        except StopIteration:
            raise TsockError(f"consumer {self.consumer.name} has read all its epochs (tsock mount --epochs)") from None
        for batch in epoch:
            yield self.convert(batch)

    def convert(self, batch: Any) -> Any:
        """(images, labels) tensors of one batch of tsock's own pipeline;
        any other batch in the structure it was published in."""
        if not isinstance(batch, Batch) or STRUCTURE in batch.meta or "images" not in batch:
            return self._structure(batch)
        torch = self.torch
        images = torch.from_numpy(batch["images"])
        if batch.meta.get("layout") == "nhwc":
            images = images.permute(0, 3, 1, 2)
        images = images.to(self.device, non_blocking=True)
        if self.dtype is not None:
            images = images.to(self.dtype).div_(255)
            if self.mean is not None:
                images.sub_(self.mean)
            if self.std is not None:
                images.div_(self.std)
        labels = torch.from_numpy(batch["labels"]).to(self.device, non_blocking=True)
        return images, labels

    def _structure(self, value):
        """The same dict or tuple, of torch tensors on the device."""
        if isinstance(value, tuple):
            return tuple(self._tensor(v) for v in value)
        return {k: self._tensor(v) for k, v in value.items()}

    def _tensor(self, a):
        torch = self.torch
        if isinstance(a, Ragged):
            return Ragged(self._tensor(a.values), self._tensor(a.offsets))
        if a.dtype == np.uint16:  # only BF16 arrives as uint16 (U16 is not a tsock dtype)
            t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(a)
        return t.to(self.device, non_blocking=True)

    @property
    def indices(self) -> Optional[np.ndarray]:
        """The dataset indices of the batch last yielded (numpy int64), or
        None where batches carry none."""
        return self.consumer.indices

    def close(self) -> None:
        """Leaves the mount (its consumer's close)."""
        self.consumer.close()


# --- Producers: any pipeline publishes through tsock (tsock mount --ingest) --


def _flatten(batch):
    """Named tensors (numpy, C-contiguous) and the structure of a batch:
    a dict, or a tuple/list, of numpy arrays or torch tensors; a list of
    arrays in a dict or a tuple element is ragged (x and x.offsets)."""
    if isinstance(batch, dict):
        kind, items = {"kind": "dict", "keys": list(batch)}, list(batch.items())
    elif isinstance(batch, (tuple, list)):
        kind, items = {"kind": "tuple", "len": len(batch)}, [(str(i), v) for i, v in enumerate(batch)]
    else:
        raise TsockError(f"publish: a batch is a dict or a tuple of arrays, not {type(batch).__name__}")
    tensors = []
    for name, v in items:
        if isinstance(v, (list, tuple)):
            parts = [_array(x)[0] for x in v]
            offsets = np.zeros(len(parts) + 1, np.int64)
            offsets[1:] = np.cumsum([len(x) for x in parts])
            values = np.concatenate(parts) if parts else np.zeros(0, np.float32)
            tensors += [(name, values, NAMES.get(values.dtype)), (name + ".offsets", offsets, "I64")]
        else:
            a, dtype = _array(v)
            tensors.append((name, a, dtype))
    return tensors, kind


def _array(v):
    """A C-contiguous numpy view of v (no copy for CPU tensors) and its
    safetensors dtype."""
    dtype = None
    if type(v).__module__.startswith("torch"):
        import torch

        if v.dtype == torch.bfloat16:
            v, dtype = v.view(torch.int16), "BF16"
        v = v.detach().cpu().contiguous().numpy()
    a = np.ascontiguousarray(v)
    if a.ndim == 0:
        a = a.reshape(1)
    dtype = dtype or NAMES.get(a.dtype)
    if dtype is None:
        raise TsockError(f"publish: dtype {a.dtype} has no safetensors equivalent tsock accepts")
    return a, dtype


def _write_batch(path, tensors, meta):
    """Writes named tensors as a new safetensors file at path, each
    tensor's buffer straight from its array. The header leaves room
    before the data for tsock's own metadata, so that tsock rewrites it
    in place: the data starts on a page."""
    header = {"__metadata__": meta}
    at = 0
    for name, a, dtype in tensors:
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + a.nbytes]}
        at += a.nbytes
    js = json.dumps(header, separators=(",", ":")).encode()
    n = (8 + len(js) + 256 + PAGE - 1) // PAGE * PAGE - 8
    with open(path, "xb", buffering=0) as f:
        _write_all(f, memoryview(struct.pack("<Q", n) + js + b" " * (n - len(js))))
        for _, a, _ in tensors:
            if a.nbytes:
                _write_all(f, memoryview(a).cast("B"))


def _write_all(f, mv):
    """An unbuffered write may be partial (a signal, FUSE): write the rest."""
    while mv:
        mv = mv[f.write(mv):]


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
        tensors, kind = _flatten(batch)
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
            _write_batch(path, tensors, meta)
        except OSError as e:
            raise self._error(e, f"publish {path}") from None
        return seq

    def _error(self, e, what):
        """The exception for an OSError of an ingest/ file: MountClosed when
        the daemon stops, else the errno with ingest/status's reason."""
        if e.errno in _GONE:
            return MountClosed(f"{self.mount}: the tsock daemon stopped ({e.strerror})")
        if e.errno == errno.ENODATA:
            return TsockError(f"{self.mount}: {what}: no samples left: every sample of the dataset was skipped "
                              f"(see ingest/status)")
        try:
            why = _read_status(os.path.join(self.dir, "status"), self.mount).get("last refusal", "see ingest/status")
        except TsockError:
            why = "ingest/status unreadable"
        return TsockError(f"{self.mount}: {what}: {e.strerror}: {why}")


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


def _serve(p, dataset, batch_size, num_workers, collate_fn, epochs, dataloader_kwargs):
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
        loader = tud.DataLoader(_Indexed(dataset), batch_sampler=sampler, num_workers=num_workers,
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

    def __init__(self, dataset):
        self.dataset = dataset

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        try:
            return i, self.dataset[i]
        except Exception:  # a bad sample is skipped, not fatal
            return i, None


def _collate(items, collate):
    good = [i for i, x in items if x is not None]
    failed = [i for i, x in items if x is None]
    batch = collate([x for _, x in items if x is not None]) if good else None
    return batch, good, failed


def serve_iterable(mount: Path, iterable: Iterable[Any], epochs: Optional[int] = 1) -> None:
    """Shares any iterable of batches (an existing DataLoader, a JAX or TF
    pipeline yielding numpy) through a mount made with `tsock mount
    --ingest` (unordered mode): `epochs` passes over it, each marked as
    one epoch for the consumers. Returns early if the mount stops."""
    p = Producer(mount)
    try:
        for epoch in range(epochs):
            prev = None
            for batch in iterable:
                if prev is not None:
                    p.publish(prev, epoch=epoch)
                prev = batch
            if prev is not None:
                p.publish(prev, epoch=epoch, last=True)
    except MountClosed:
        pass


# --- GPU mode (tsock mount --device) ---------------------------------------

TYPESTR = {"U8": "|u1", "I64": "<i8"}
_handles = {}  # (slab handle hex) → device pointer: each process opens a handle once


class CudaArray:
    """A tensor in tsock's GPU memory, for any framework that takes
    __cuda_array_interface__ (torch.as_tensor, cupy.asarray, numba; JAX
    through DLPack from those). Read-only by contract, not by flag: torch
    refuses arrays flagged read-only, and a write would change the batch
    for every consumer. It keeps its batch's .cuda file open, and so the
    batch held, for as long as it lives."""

    def __init__(self, ptr: int, shape: Sequence[int], typestr: str, holder: Any) -> None:
        self.ptr, self.shape, self.typestr = ptr, tuple(shape), typestr
        self._holder = holder

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        return {"shape": self.shape, "typestr": self.typestr, "data": (self.ptr, False), "version": 3, "strides": None}


class _Held:
    """An open .cuda file: the batch is held until this is collected.

    GPU work is asynchronous: when the last tensor of a batch is dropped,
    kernels that read it may still be queued. Closing the file then would
    let tsock copy the next batch into that memory under them, so the
    release first waits for this process's GPU work (synchronize)."""

    def __init__(self, fd, synchronize):
        self.fd, self.synchronize = fd, synchronize

    def __del__(self):
        try:
            self.synchronize()
        finally:
            os.close(self.fd)


def _cupy_opener(device_uuid):
    """Opens IPC handles with CuPy on the local device whose UUID matches
    (device numbers differ between processes; the GPU must be the same)."""
    import cupy

    rt = cupy.cuda.runtime
    for i in range(rt.getDeviceCount()):
        uuid = bytes(rt.getDeviceProperties(i)["uuid"])
        if "GPU-%s-%s-%s-%s-%s" % tuple(uuid.hex()[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))) == device_uuid:
            break
    else:
        raise TsockError(f"no local GPU is {device_uuid}: CUDA IPC works only on the GPU tsock uses")

    def open_handle(handle):
        with cupy.cuda.Device(i):
            return rt.ipcOpenMemHandle(handle)

    return open_handle


def _cupy_synchronize():
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def _cupy_concat(parts, shape, typestr):
    import cupy

    return cupy.concatenate([cupy.asarray(p).ravel() for p in parts]).reshape(shape)


def cuda_batches(mount: Path, name: Optional[str] = None, batch_size: Optional[int] = None,
                 open_handle: Optional[Callable[..., Any]] = None, concat: Optional[Callable[..., Any]] = None,
                 synchronize: Optional[Callable[[], None]] = None, subset: Any = None) -> Iterator[Dict[str, Any]]:
    """Yields each batch as a dict of GPU tensors in tsock's memory.

    Needs `tsock mount --device` and this process on the same physical GPU.
    A tensor in one segment is zero copy (a CudaArray: torch.as_tensor(x,
    device="cuda"), cupy.asarray(x)); one that spans slabs (a consumer
    batch size that cuts producer batches) is joined on the device by
    concat (CuPy by default). open_handle maps an IPC handle to a device
    pointer (CuPy's ipcOpenMemHandle by default); each slab is opened once
    per process. Keep a batch's tensors only while you use them: they hold
    its memory, and tsock reuses it once the batch is released. Before a
    batch is released, synchronize waits for this process's queued GPU
    work, which may still read it (CuPy's deviceSynchronize by default).
    """
    slabs = {}  # slab id → (IPC handle, offset of the slab in its allocation)
    try:
        with open(os.path.join(os.fspath(mount), "gpu", "slabs")) as f:
            for line in f:
                sid, handle, _size, _uuid, *offset = line.split()
                slabs[int(sid)] = handle, int(offset[0]) if offset else 0
    except FileNotFoundError:
        raise TsockError(f"{mount}: no gpu/slabs: not mounted in GPU mode (tsock mount --device)") from None
    c = Consumer(mount, name=name, batch_size=batch_size, subset=subset)
    state = {"open": open_handle, "concat": concat or _cupy_concat}
    synchronize = synchronize or _cupy_synchronize

    def load(path):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        holder = _Held(fd, synchronize)
        size = os.fstat(fd).st_size
        data = b""
        while len(data) < size:
            chunk = os.read(fd, size - len(data))
            if not chunk:
                break
            data += chunk
        try:
            desc = json.loads(data)
        except ValueError:
            raise TsockError(f"{path}: not a tsock .cuda file") from None
        if state["open"] is None:
            state["open"] = _cupy_opener(desc["device"])
        tensors = {}
        for t in desc["tensors"]:
            tname, typestr = t["name"], TYPESTR[t["dtype"]]
            if "values" in t:  # ragged offsets, made anew for this batch
                tensors[tname] = np.asarray(t["values"], np.int64)
                continue
            parts = []
            for seg in t["segments"]:
                handle, slab_offset = slabs[seg["slab"]]
                if handle not in _handles:
                    _handles[handle] = state["open"](bytes.fromhex(handle))
                count = seg["bytes"] // np.dtype(typestr).itemsize
                parts.append(CudaArray(_handles[handle] + slab_offset + seg["offset"], (count,), typestr, holder))
            if len(parts) == 1:
                parts[0].shape = tuple(t["shape"])
                tensors[tname] = parts[0]
            else:
                tensors[tname] = state["concat"](parts, t["shape"], typestr)
        meta = dict(desc.get("metadata") or {}, epoch=desc["epoch"], batch=desc["batch"], device=desc["device"])
        return Batch(tensors, meta, path)

    c._suffix, c._load = ".cuda", load
    return c
