"""How an epoch's order mixes labels, against a uniform shuffle of the
same labels, as a training sees it through a mount: three statistics of
the batches a consumer reads, each compared with the mean of uniform
shuffles of the same labels cut into batches of the same size.

  distinct  labels in a batch (a batch of few classes: BatchNorm and the
            gradient see a few classes at a time)
  shared    of a batch's labels, the share the batch before it held
            (consecutive batches of the same classes: no longer
            independent draws)
  even      of an epoch's tenths, the share that hold each label (a class
            bunched in part of the epoch, absent from the rest)

    mixstats.py MOUNT [--epochs 2] [--batch-size N]

prints a JSON line per epoch: {"epoch", "batch_size", "distinct",
"shared", "even", and "uniform": the same for a uniform shuffle}.
"""
import argparse
import json
import os
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tsock  # noqa: E402

TENTHS = 10


def stats(batches: Sequence[np.ndarray]) -> Dict[str, float]:
    """The three statistics of an epoch's batches (arrays of labels)."""
    sets = [set(np.asarray(b).tolist()) for b in batches if len(b)]
    distinct = float(np.mean([len(s) for s in sets]))
    shared = float(np.mean([len(sets[k] & sets[k - 1]) / len(sets[k]) for k in range(1, len(sets))])) if len(sets) > 1 else 1.0
    labels = np.concatenate([np.asarray(b) for b in batches])
    tenth = np.arange(len(labels)) * TENTHS // len(labels)
    seen: Dict[int, set] = {}
    for label, t in zip(labels.tolist(), tenth.tolist()):
        seen.setdefault(label, set()).add(t)
    even = float(np.mean([len(t) / TENTHS for t in seen.values()]))
    return {"distinct": distinct, "shared": shared, "even": even}


def uniform(batches: Sequence[np.ndarray], trials: int = 20, seed: int = 0) -> Dict[str, float]:
    """The statistics' means over uniform shuffles of the same labels, cut
    into batches of the same sizes."""
    labels = np.concatenate([np.asarray(b) for b in batches])
    cuts = np.cumsum([len(b) for b in batches])[:-1]
    rng = np.random.default_rng(seed)
    runs = [stats(np.split(rng.permutation(labels), cuts)) for _ in range(trials)]
    return {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}


def measure(mount: str, epochs: int = 2, batch_size: Optional[int] = None) -> List[Dict]:
    """Joins mount, reads epochs epochs of labels, and returns each
    epoch's statistics beside a uniform shuffle's."""
    out = []
    with tsock.Consumer(mount, batch_size=batch_size) as c:
        for e, epoch in enumerate(c.epochs()):
            batches = [np.array(b["labels"]) for b in epoch]
            size = max(len(b) for b in batches)
            out.append({"epoch": e, "batch_size": size, **stats(batches), "uniform": uniform(batches)})
            if e + 1 == epochs:
                break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mount")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int)
    args = ap.parse_args()
    for row in measure(args.mount, args.epochs, args.batch_size):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
