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

import os

from tsock import status
from tsock.batchfile import Batch, Ragged, load_batch
from tsock.consumer import Consumer
from tsock.control import read_classes
from tsock.cuda import CudaArray, cuda_batches
from tsock.errors import MountClosed, TsockError
from tsock.ingest import Producer, serve, serve_iterable
from tsock.loader import TorchLoader, kfold, torch_loader
from tsock.ranks import GroupFailed

__all__ = ["Batch", "Consumer", "CudaArray", "GroupFailed", "MountClosed", "Producer", "Ragged", "TorchLoader", "TsockError",
           "cuda_batches", "kfold", "load_batch", "read_classes", "serve", "serve_iterable", "status", "torch_loader"]


def _version() -> str:
    """The version tsock's Go binary reports too: one file, cmd/tsock/VERSION,
    copied into the package when it is installed."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "VERSION"), encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return "(unknown)"


__version__ = _version()
