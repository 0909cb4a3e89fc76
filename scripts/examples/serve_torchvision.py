#!/usr/bin/env python3
"""Your own torchvision pipeline, run once and shared by every trial.

The pipeline is one tsock does not build in: ImageFolder with
RandomResizedCrop, RandAugment and RandomErasing. tsock.serve runs it once
(ordered mode: tsock owns the sampler), and each trial reads it through
tsock.torch_loader as it would read its own DataLoader.

    serve_torchvision.py sweep FOLDER [--trials 4] [--epochs 2] [--tsock BIN]
        the whole thing: mounts `tsock mount --ingest`, starts the trials
        (each a process training its own learning rate), serves, checks
        that every trial's every epoch held each image exactly once, and
        prints one JSON line (exit 1 if any epoch was not exact)
    serve_torchvision.py serve MOUNT FOLDER [--epochs E]     the producer alone (--epochs 0: until the mount stops)
    serve_torchvision.py train MOUNT --lr LR [--name NAME]   one trial
    serve_torchvision.py read MOUNT                          a trial without a model (benchmarks)
    serve_torchvision.py loader FOLDER                       the same pipeline in the trial's own DataLoader

Common options: --batch-size 64, --image-size 96, --workers (default: all
cores for serve, cores/4 for loader). train, read and loader print one
JSON line each; scripts/bench.sh uses read and loader.
"""
import argparse
import json
import os
import sys
import time

import torch
from torch import nn

import tsock  # noqa: E402

import demo_mount  # noqa: E402  (next to this file)


def dataset(folder, size):
    """The user's own pipeline: nothing here is tsock's."""
    from torchvision import datasets, transforms

    return datasets.ImageFolder(folder, transform=transforms.Compose([
        transforms.RandomResizedCrop(size),
        transforms.RandAugment(),
        transforms.PILToTensor(),
        transforms.RandomErasing(p=0.25, value=0),
    ]))


def serve(args):
    ds = dataset(args.folder, args.image_size)
    print(f"serve_torchvision: serving {len(ds)} images", file=sys.stderr, flush=True)
    # The three lines a user writes: the dataset above, then this.
    tsock.serve(args.mount, ds, batch_size=args.batch_size, num_workers=args.workers, epochs=args.epochs or None)


def model(classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes),
    )


class EpochLog:
    """What a trial saw in each epoch: images, and its dataset indices
    (counted, distinct, summed) when the batches carry them."""

    def __init__(self):
        self.epochs = []

    def start(self):
        self.epochs.append({"images": 0, "seen": set(), "index_sum": 0})

    def add(self, n, indices):
        e = self.epochs[-1]
        e["images"] += n
        if indices is not None:
            e["seen"].update(indices.tolist())
            e["index_sum"] += int(indices.sum())

    def json(self):
        return [{"images": e["images"], "distinct": len(e["seen"]), "index_sum": e["index_sum"]} for e in self.epochs]


def train(args):
    """One trial: the same loop as with a DataLoader, over tsock.torch_loader."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    loader = tsock.torch_loader(args.mount, name=args.name)
    net = model(args.classes)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    losses, log = [], EpochLog()
    start = time.perf_counter()
    for _ in range(args.epochs):
        log.start()
        for images, labels in loader:
            x = (images.float().div_(255) - 0.5) / 0.25
            loss = loss_fn(net(x), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            log.add(len(labels), loader.indices)
    loader.close()
    k = min(5, len(losses))
    print(json.dumps({
        "name": args.name, "lr": args.lr, "epochs": log.json(), "steps": len(losses),
        "first_loss": round(sum(losses[:k]) / max(k, 1), 4), "last_loss": round(sum(losses[-k:]) / max(k, 1), 4),
        "seconds": round(time.perf_counter() - start, 2),
    }), flush=True)


def read(args):
    """A trial without a model: every batch as torch tensors, every byte
    touched; for the benchmark's consumer side."""
    torch.set_num_threads(1)
    demo_mount.start_together(args.go)
    start, wall = time.perf_counter(), time.time()
    loader = tsock.torch_loader(args.mount, name=args.name, dtype=None)
    log = EpochLog()
    for _ in range(args.epochs):
        log.start()
        for images, labels in loader:
            int(images.max())
            log.add(len(labels), loader.indices)
    loader.close()
    seconds = time.perf_counter() - start
    images = sum(e["images"] for e in log.epochs)
    print(json.dumps({"epochs": log.json(), "images": images, "seconds": round(seconds, 3),
                      "start": wall, "end": time.time()}), flush=True)


def loader(args):
    """The baseline: the same pipeline in the trial's own DataLoader, whole
    epochs (worker start included, as a training sees it)."""
    torch.set_num_threads(1)
    ds = dataset(args.folder, args.image_size)
    demo_mount.start_together(args.go)
    start, wall, images = time.perf_counter(), time.time(), 0
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    for _ in range(args.epochs):
        for x, labels in dl:
            int(x.max())
            images += len(labels)
    print(json.dumps({"images": images, "seconds": round(time.perf_counter() - start, 3),
                      "start": wall, "end": time.time()}), flush=True)


def sweep(args):
    n = len(dataset(args.folder, args.image_size))
    trials = [[sys.executable, __file__, "train", None, "--lr", str(0.1 / 2**i), "--name", f"trial-{i}",
               "--epochs", str(args.epochs), "--classes", str(args.classes)] for i in range(args.trials)]
    start = time.perf_counter()

    def serve_all(mnt):
        nonlocal start
        start = time.perf_counter()
        args.mount = mnt
        serve(args)

    results = demo_mount.run("serve_torchvision", args.tsock, ["--ingest", "--samples", str(n), "--batch-size",
                             str(args.batch_size), "--epochs", str(args.epochs), "--buffer", args.buffer],
                             trials, serve_all)
    seconds = time.perf_counter() - start
    exact = all(len(r["epochs"]) == args.epochs and
                all(e["images"] == n and e["distinct"] == n and e["index_sum"] == n * (n - 1) // 2 for e in r["epochs"])
                for r in results)
    images = sum(e["images"] for r in results for e in r["epochs"])
    print(json.dumps({"samples": n, "trials": results, "exact_epochs": exact,
                      "images_per_s": round(images / seconds, 1), "seconds": round(seconds, 2)}))
    if not exact:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    cores = len(os.sched_getaffinity(0))
    for name, fn, positional, workers in (("sweep", sweep, ["folder"], cores), ("serve", serve, ["mount", "folder"], cores),
                                          ("train", train, ["mount"], 0), ("read", read, ["mount"], 0),
                                          ("loader", loader, ["folder"], cores // 4)):
        p = sub.add_parser(name)
        for pos in positional:
            p.add_argument(pos)
        p.set_defaults(fn=fn)
        p.add_argument("--epochs", type=int, default=2)
        p.add_argument("--batch-size", type=int, default=64)
        p.add_argument("--image-size", type=int, default=96)
        p.add_argument("--workers", type=int, default=workers, help="DataLoader workers")
        p.add_argument("--name", help="the trial's consumer name")
        p.add_argument("--lr", type=float, default=0.05)
        p.add_argument("--classes", type=int, default=10, help="the model's classes (at least the folder's)")
        p.add_argument("--trials", type=int, default=4)
        p.add_argument("--buffer", default="512MiB", help="tsock mount --buffer")
        p.add_argument("--go", help="read, loader: start when this file exists (benchmarks)")
        p.add_argument("--tsock", help="the tsock binary (default $TSOCK_BIN, else tsock on PATH)")
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
