"""Trains the same small network, with the same hyper-parameters and
seeds, from torchvision's own DataLoader and from tsock, and compares
validation accuracy: does each trial learn from tsock as well as from its
own loader?

    accuracy.py --train DIR --val DIR --shards SPEC --shard-memory BYTES \
        [--parquet SPEC --parquet-memory BYTES] [--sides dataloader,folder,shards,parquet] \
        [--seeds 3] [--epochs 6] [--image-size 64] [--batch-size 32] [--optimizer adamw|sgd] [--tsock BIN]

Sides, each trained once per seed (torch's seed for the weights, the
loader's seed for the order and the crops):
  dataloader  torchvision ImageFolder(DIR), RandomResizedCrop + flip,
              shuffle=True, 2 workers
  folder      tsock mount --source DIR (its own shuffle, crops and flips)
  shards      tsock mount --source SPEC --shard-memory BYTES (tar shards:
              pass them as written, e.g. one class a shard, class-sorted)
  parquet     tsock mount --source SPEC --shard-memory BYTES (Parquet files
              of the Hub's layout, e.g. one class a file, class-sorted)
Validation: Resize(round(S/0.875)) + CenterCrop(S) of --val, the same for
all. Prints a JSON line per run, then a table: each side's mean accuracy,
(min-max), and its difference from the DataLoader's, over the seeds.
"""
import argparse
import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tsock  # noqa: E402

MEAN, STD = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]


def model(classes):
    """A small CNN with BatchNorm: what a batch of few classes hurts."""
    def block(i, o):
        return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(2)]
    return nn.Sequential(*block(3, 32), *block(32, 64), *block(64, 128),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, classes))


def normalize(images):
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return (images.float().div(255) - mean) / std


def dataloader(args, seed):
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.RandomResizedCrop(args.image_size), transforms.RandomHorizontalFlip(),
                             transforms.PILToTensor()])
    ds = datasets.ImageFolder(args.train, transform=tf)
    g = torch.Generator()
    g.manual_seed(seed)
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=2, generator=g,
                                     persistent_workers=True, worker_init_fn=lambda w: torch.manual_seed(seed * 100 + w))
    for _ in range(args.epochs):
        yield ((normalize(x), y) for x, y in dl)


class Mount:
    """A tsock mount of source for one run, unmounted at the end."""

    def __init__(self, args, seed, source, extra):
        self.dir = tempfile.mkdtemp(prefix="tsock-accuracy-")
        self.proc = subprocess.Popen([args.tsock, "mount", self.dir, "--source", source, "--image-size", str(args.image_size),
                                      "--batch-size", str(args.batch_size), "--epochs", str(args.epochs), "--seed", str(seed),
                                      "--workers", "2", *extra], stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("tsock: mounted"):
            self.close()
            sys.exit(f"accuracy: tsock mount --source {source} did not come up: {line!r}")

        self.loader = None

    def epochs(self, args):
        self.loader = tsock.torch_loader(self.dir, mean=MEAN, std=STD)
        for _ in range(args.epochs):
            yield iter(self.loader)

    def close(self):
        if self.loader is not None:
            self.loader.close()  # its batches unmapped: the mount is not busy
            gc.collect()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait()
        os.rmdir(self.dir)


def evaluate(net, args):
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.Resize(round(args.image_size / 0.875)), transforms.CenterCrop(args.image_size),
                             transforms.PILToTensor()])
    ds = datasets.ImageFolder(args.val, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=256, num_workers=2)
    net.eval()
    right = total = 0
    with torch.no_grad():
        for x, y in dl:
            right += (net(normalize(x)).argmax(1) == y).sum().item()
            total += len(y)
    return right / total


def train(args, side, seed, classes):
    torch.manual_seed(seed)
    net = model(classes)
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    else:
        opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=5e-4)
    mount = None
    if side == "dataloader":
        epochs = dataloader(args, seed)
    else:
        source, extra = {
            "folder": (args.train, []),
            "shards": (args.shards, ["--shard-memory", args.shard_memory, *args.shard_flag]),
            "parquet": (args.parquet, ["--shard-memory", args.parquet_memory, *args.shard_flag]),
        }[side]
        mount = Mount(args, seed, source, extra)
        epochs = mount.epochs(args)
    try:
        steps = args.epochs * -(-sum(len(f) for _, _, f in os.walk(args.train)) // args.batch_size)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps + args.epochs)
        for epoch in epochs:
            net.train()
            for x, y in epoch:
                opt.zero_grad()
                nn.functional.cross_entropy(net(x), y).backward()
                opt.step()
                sched.step()
    finally:
        if mount:
            mount.close()
    return evaluate(net, args)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--val", required=True)
    ap.add_argument("--shards", help="the train set as tar shards (a tsock --source); for the shards side")
    ap.add_argument("--shard-memory", help="tsock mount --shard-memory for the shards")
    ap.add_argument("--shard-flag", action="append", default=[],
                    help="a further tsock mount flag for the shards (repeat; e.g. --shard-flag=--shard-disk --shard-flag=0)")
    ap.add_argument("--parquet", help="the train set as Parquet files (a tsock --source); for the parquet side")
    ap.add_argument("--parquet-memory", help="tsock mount --shard-memory for the Parquet files")
    ap.add_argument("--sides", default="dataloader,folder,shards")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw",
                    help="AdamW, or SGD with momentum 0.9 (more sensitive to the order: batches of few classes cost it more)")
    ap.add_argument("--lr", type=float, help="the one-cycle schedule's peak (default 3e-3 for AdamW, 0.05 for SGD)")
    ap.add_argument("--tsock", default=os.environ.get("TSOCK_BIN", "tsock"))
    args = ap.parse_args()
    if args.lr is None:
        args.lr = 0.05 if args.optimizer == "sgd" else 3e-3
    # A signal ends the run through the finally clauses: no mount left.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    classes = len([d for d in os.listdir(args.train) if os.path.isdir(os.path.join(args.train, d))])
    sides = args.sides.split(",")
    if "shards" in sides and not (args.shards and args.shard_memory):
        ap.error("the shards side needs --shards and --shard-memory")
    if "parquet" in sides and not (args.parquet and args.parquet_memory):
        ap.error("the parquet side needs --parquet and --parquet-memory")
    acc = {s: [] for s in sides}
    for seed in range(1, args.seeds + 1):
        for side in sides:  # interleaved: each seed runs every side
            a = train(args, side, seed, classes)
            acc[side].append(a)
            print(json.dumps({"side": side, "seed": seed, "accuracy": a}), flush=True)
    table(acc, "dataloader", "side", "the DataLoader's", args.seeds)


def table(acc, base_side, label, base_name, seeds):
    """Each side's mean accuracy (min-max) over the seeds, and its
    difference from base_side's, seed by seed, as a Markdown table."""
    base = acc.get(base_side)
    print(f"\n| {label} | validation accuracy, mean (min-max) over {seeds} seeds | minus {base_name}, mean (min-max, per seed) |")
    print("|---|---|---|")
    for side, a in acc.items():
        diff = "" if side == base_side or not base else (
            f"{statistics.mean(x - y for x, y in zip(a, base)):+.3f} ({min(x - y for x, y in zip(a, base)):+.3f} to {max(x - y for x, y in zip(a, base)):+.3f})")
        print(f"| {side} | {statistics.mean(a):.3f} ({min(a):.3f}-{max(a):.3f}) | {diff} |")


if __name__ == "__main__":
    main()
