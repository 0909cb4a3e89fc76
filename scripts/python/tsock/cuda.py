"""GPU mode (tsock mount --device): batches as CUDA arrays over the
mount's shared slabs, by CUDA IPC."""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, cast

import numpy as np

from tsock.batchfile import Batch, Path
from tsock.consumer import Consumer
from tsock.errors import TsockError

TYPESTR = {"U8": "|u1", "I64": "<i8"}
_handles: Dict[str, int] = {}  # (slab handle hex) → device pointer: each process opens a handle once


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

    def __init__(self, fd: int, synchronize: Callable[[], None]) -> None:
        self.fd, self.synchronize = fd, synchronize

    def __del__(self) -> None:
        try:
            self.synchronize()
        finally:
            os.close(self.fd)


def _cupy_opener(device_uuid: str) -> Callable[[str], int]:
    """Opens IPC handles with CuPy on the local device whose UUID matches
    (device numbers differ between processes; the GPU must be the same)."""
    import cupy  # type: ignore[import]  # optional: the [cuda] extra

    rt = cupy.cuda.runtime
    for i in range(rt.getDeviceCount()):
        uuid = bytes(rt.getDeviceProperties(i)["uuid"])
        if "GPU-%s-%s-%s-%s-%s" % tuple(uuid.hex()[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))) == device_uuid:
            break
    else:
        raise TsockError(f"no local GPU is {device_uuid}: CUDA IPC works only on the GPU tsock uses")

    def open_handle(handle: str) -> int:
        with cupy.cuda.Device(i):
            return rt.ipcOpenMemHandle(handle)

    return open_handle


def _cupy_synchronize() -> None:
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def _cupy_concat(parts: Sequence[Any], shape: Sequence[int], typestr: str) -> Any:
    import cupy

    return cupy.concatenate([cupy.asarray(p).ravel() for p in parts]).reshape(shape)


def cuda_batches(mount: Path, name: Optional[str] = None, batch_size: Optional[int] = None,
                 open_handle: Optional[Callable[..., Any]] = None, concat: Optional[Callable[..., Any]] = None,
                 synchronize: Optional[Callable[[], None]] = None, subset: Any = None, rank: Optional[int] = None,
                 world: Optional[int] = None, drop_last: bool = False) -> Consumer:
    """A consumer whose batches are dicts of GPU tensors in tsock's memory.

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
    rank, world and drop_last: a data-parallel rank's share, as Consumer.
    """
    slabs = {}  # slab id → (IPC handle, offset of the slab in its allocation)
    try:
        with open(os.path.join(os.fspath(mount), "gpu", "slabs")) as f:
            for line in f:
                sid, handle, _size, _uuid, *offset = line.split()
                slabs[int(sid)] = handle, int(offset[0]) if offset else 0
    except FileNotFoundError:
        raise TsockError(f"{mount}: no gpu/slabs: not mounted in GPU mode (tsock mount --device)") from None
    c = Consumer(mount, name=name, batch_size=batch_size, subset=subset, rank=rank, world=world, drop_last=drop_last)
    state: Dict[str, Any] = {"open": open_handle, "concat": concat or _cupy_concat}
    sync: Callable[[], None] = synchronize or _cupy_synchronize

    def load(path: str) -> Batch:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        holder = _Held(fd, sync)
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
        tensors: Dict[str, Any] = {}
        for t in desc["tensors"]:
            tname, typestr = t["name"], TYPESTR[t["dtype"]]
            if "values" in t:  # ragged offsets, made anew for this batch
                tensors[tname] = np.asarray(t["values"], np.int64)
                continue
            parts = []
            for seg in t["segments"]:
                handle, slab_offset = slabs[seg["slab"]]
                if handle not in _handles:
                    opener = cast(Callable[[bytes], int], state["open"])
                    _handles[handle] = opener(bytes.fromhex(handle))
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
