"""The batch format: safetensors files whose tensors all have the batch's
samples along their first dimension (batchstore/batchfile in Go). Reading
maps a file and makes numpy views of it; writing lays tensors out as tsock
rewrites them in place."""
from __future__ import annotations

import json
import mmap
import os
import struct
import weakref
from typing import Any, BinaryIO, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from tsock.errors import TsockError

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


class Batch(dict):
    """One batch: a dict of numpy arrays, with the file's metadata.

    epoch is the consumer's own epoch, index the batch's number in it;
    size is the file's length; direct says its arrays map the daemon's
    own file, around FUSE (where the daemon runs without root). A ragged tensor x (with x.offsets) is a
    Ragged. value is the batch in the structure its producer published
    (a dict, or a tuple), without tsock's own "indices" if it added them.
    """

    def __init__(self, tensors: Dict[str, Any], meta: Dict[str, Any], path: str, size: int = 0) -> None:
        super().__init__(_join_ragged(tensors))
        self.meta = meta
        self.path = path
        self.size = size
        self.epoch = int(meta.get("epoch", 0))
        self.index = int(meta.get("batch", 0))
        self.dtypes: Dict[str, str] = meta.pop("_dtypes", {})
        self.direct = False

    @property
    def value(self) -> Union["Batch", Dict[str, Any], Tuple[Any, ...]]:
        """The batch in the structure its producer published."""
        shape = self.meta.get(STRUCTURE)
        if shape is None:
            return self
        spec = json.loads(shape)
        if spec["kind"] == "tuple":
            return tuple(self[str(i)] for i in range(spec["len"]))
        return {k: self[k] for k in spec["keys"]}


class Ragged:
    """A tensor whose samples vary in length: sample i is
    values[offsets[i]:offsets[i+1]] (zero copy)."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray) -> None:
        self.values, self.offsets = values, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"tsock.Ragged({len(self)} samples, {len(self.values)} values of {self.values.dtype})"


def _join_ragged(tensors: Dict[str, np.ndarray]) -> Dict[str, Any]:
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
        m = _map_direct(fd, size, writable)
        direct = m is not None
        if m is None:
            # mmap keeps a duplicate of fd: the file stays open, and the
            # batch held, until the mapping is gone.
            m = _map(fd, size, writable)
    finally:
        os.close(fd)
    tensors, meta = _parse(path, m, size)
    batch = Batch(tensors, meta, os.fspath(path), size)
    batch.direct = direct
    return batch


# DIRECT_XATTR says where a batch's bytes lie around FUSE (fs.DirectXattr):
# "/proc/PID/fd/N INODE", given where the daemon runs without root.
DIRECT_XATTR = "user.tsock.direct"


def _map(fd: int, size: int, writable: bool) -> mmap.mmap:
    if writable:
        return mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    return mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)


def _map_direct(fd: int, size: int, writable: bool) -> Optional[mmap.mmap]:
    """Maps the batch open as fd (its lease) from where its bytes lie, the
    daemon's own file, around FUSE: at memory speed where the daemon runs
    without root (through FUSE, a user's reads come from 4 KiB pages of
    the page cache). None wherever that is not to be had (a root mount,
    whose passthrough serves reads already; another user's daemon, whose
    /proc/PID/fd this process may not open; another PID namespace; no
    /proc; TSOCK_DIRECT=0), and the caller maps fd itself. The mount's
    file stays open, holding the lease, as long as the mapping lives:
    a duplicate of fd goes with it."""
    if os.environ.get("TSOCK_DIRECT", "1") == "0":
        return None
    try:
        where = os.getxattr(fd, DIRECT_XATTR).decode()
        direct_path, ino = where.rsplit(" ", 1)
        direct = os.open(direct_path, os.O_RDONLY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(direct)
        if st.st_ino != int(ino) or st.st_size < size:
            return None  # not the batch's file (the daemon's descriptor moved on)
        m = _map(direct, size, writable)
    except (OSError, ValueError):
        return None
    finally:
        os.close(direct)
    # The lease: the mount's file open as long as the mapping lives.
    lease = os.dup(fd)
    weakref.finalize(m, os.close, lease)
    return m


def _parse(path: Path, m: mmap.mmap, size: int) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
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


def flatten(batch: Any) -> Tuple[List[Tuple[str, np.ndarray, str]], Dict[str, Any]]:
    """Named tensors (numpy, C-contiguous) and the structure of a batch:
    a dict, or a tuple/list, of numpy arrays or torch tensors; a list of
    arrays in a dict or a tuple element is ragged (x and x.offsets)."""
    kind: Dict[str, Any]
    if isinstance(batch, dict):
        kind, items = {"kind": "dict", "keys": list(batch)}, list(batch.items())
    elif isinstance(batch, (tuple, list)):
        kind, items = {"kind": "tuple", "len": len(batch)}, [(str(i), v) for i, v in enumerate(batch)]
    else:
        raise TsockError(f"publish: a batch is a dict or a tuple of arrays, not {type(batch).__name__}")
    tensors = []
    for name, v in items:
        if isinstance(v, (list, tuple)):
            arrays = [_array(x) for x in v]
            parts = [a for a, _ in arrays]
            kinds = sorted({d for _, d in arrays})
            if len(kinds) > 1:
                raise TsockError(f"publish: {name}: a ragged list of arrays of several dtypes ({', '.join(kinds)})")
            offsets = np.zeros(len(parts) + 1, np.int64)
            offsets[1:] = np.cumsum([len(x) for x in parts])
            values = np.concatenate(parts) if parts else np.zeros(0, np.float32)
            # The parts' own dtype: BF16 travels as 16-bit integers, which
            # numpy would name I16.
            dtype = kinds[0] if kinds else "F32"
            tensors += [(name, values, dtype), (name + ".offsets", offsets, "I64")]
        else:
            a, dtype = _array(v)
            tensors.append((name, a, dtype))
    return tensors, kind


def _array(v: Any) -> Tuple[np.ndarray, str]:
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


def write_batch(path: Path, tensors: List[Tuple[str, np.ndarray, str]], meta: Dict[str, str]) -> None:
    """Writes named tensors as a new safetensors file at path, each
    tensor's buffer straight from its array. The header leaves room
    before the data for tsock's own metadata, so that tsock rewrites it
    in place: the data starts on a page."""
    header: Dict[str, Any] = {"__metadata__": meta}
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
                _write_all(f, a.data.cast("B"))


def _write_all(f: BinaryIO, mv: memoryview) -> None:
    """An unbuffered write may be partial (a signal, FUSE): write the rest."""
    while mv:
        mv = mv[f.write(mv):]
