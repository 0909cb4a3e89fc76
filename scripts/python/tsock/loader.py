"""PyTorch: a drop-in for a DataLoader over a mount, and k-fold pairs."""
from __future__ import annotations

import warnings
from typing import Any, Iterator, Optional, Sequence, Tuple

import numpy as np

from tsock.batchfile import STRUCTURE, Batch, Path, Ragged
from tsock.consumer import Consumer
from tsock.errors import TsockError


def torch_loader(mount: Path, device: Any = "cpu", mean: Optional[Sequence[float]] = None,
                 std: Optional[Sequence[float]] = None, dtype: Any = "float32", name: Optional[str] = None,
                 batch_size: Optional[int] = None, subset: Any = None, rank: Optional[int] = None,
                 world: Optional[int] = None, drop_last: bool = False) -> "TorchLoader":
    """A drop-in for a torch DataLoader over a tsock mount.

    Each pass over it (`for images, labels in loader`) is one epoch of its
    consumer; a pass after the last epoch raises TsockError rather than
    being silently empty. images come as NCHW tensors on device, converted
    to dtype and scaled to [0, 1] there, then normalized by mean and std
    (per channel) if given; dtype=None keeps uint8 and skips both. labels
    are int64 tensors on device.

    In a data-parallel training (torchrun, DDP), each rank's loader reads
    its share of each epoch: rank, world and drop_last as Consumer takes
    them (by default RANK and WORLD_SIZE from the environment), name the
    same on every rank (by default torchrun's run id).
    """
    # uint8 tensors that view the file need a writable (private) mapping:
    # torch ignores read-only flags, and an in-place op would crash.
    consumer = Consumer(mount, name=name, batch_size=batch_size, writable=dtype is None, subset=subset,
                        rank=rank, world=world, drop_last=drop_last)
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

    def __init__(self, consumer: Consumer, device: Any, mean: Optional[Sequence[float]], std: Optional[Sequence[float]],
                 dtype: Any) -> None:
        import torch

        self.torch = torch
        self.consumer = consumer
        self.device = torch.device(device)
        self.dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        self.mean = self._channels(mean)
        self.std = self._channels(std)
        self._epochs = consumer.epochs()

    def _from_numpy(self, a: np.ndarray) -> Any:
        """A tensor over a (read-only: a view of the mapped batch, only ever
        read here), without torch's warning that it is not writable; the
        process's warning filters are left as they were."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)
            return self.torch.from_numpy(a)

    def _channels(self, v: Optional[Sequence[float]]) -> Any:
        if v is None:
            return None
        if self.dtype is None:
            raise TsockError("mean/std need a float dtype")
        return self.torch.as_tensor(v, dtype=self.dtype, device=self.device).reshape(1, -1, 1, 1)

    def __iter__(self) -> Iterator[Any]:
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
        images = self._from_numpy(batch["images"])
        if batch.meta.get("layout") == "nhwc":
            images = images.permute(0, 3, 1, 2)
        images = images.to(self.device, non_blocking=True)
        if self.dtype is not None:
            images = images.to(self.dtype).div_(255)
            if self.mean is not None:
                images.sub_(self.mean)
            if self.std is not None:
                images.div_(self.std)
        labels = self._from_numpy(batch["labels"]).to(self.device, non_blocking=True)
        return images, labels

    def _structure(self, value: Any) -> Any:
        """The same dict or tuple, of torch tensors on the device."""
        if isinstance(value, tuple):
            return tuple(self._tensor(v) for v in value)
        return {k: self._tensor(v) for k, v in value.items()}

    def _tensor(self, a: Any) -> Any:
        torch = self.torch
        if isinstance(a, Ragged):
            return Ragged(self._tensor(a.values), self._tensor(a.offsets))
        if a.dtype == np.uint16:  # only BF16 arrives as uint16 (U16 is not a tsock dtype)
            t = self._from_numpy(a.view(np.int16)).view(torch.bfloat16)
        else:
            t = self._from_numpy(a)
        return t.to(self.device, non_blocking=True)

    @property
    def indices(self) -> Optional[np.ndarray]:
        """The dataset indices of the batch last yielded (numpy int64), or
        None where batches carry none."""
        return self.consumer.indices

    def close(self) -> None:
        """Leaves the mount (its consumer's close)."""
        self.consumer.close()
