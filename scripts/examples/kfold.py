#!/usr/bin/env python3
"""K-fold cross-validation of a small CNN, every fold's trial at once, from
two tsock mounts of one dataset: a training mount (random crops) and an
evaluation mount (--transform eval). Trial k trains on every sample not in
fold k and evaluates on fold k (tsock.kfold); the folds are the same
samples on both mounts (same source, same --seed).

    kfold.py [--images 300] [--folds 5] [--epochs 2] [--tsock BIN]

Writes a dataset (tsock gendata), mounts it twice, runs the trials as
processes, and prints one JSON line: each fold's validation accuracy and
sizes, and the images the two producers decoded against what one
torchvision DataLoader per trial and mount would decode.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import demo_mount  # noqa: E402  (next to this file)

HERE = os.path.dirname(os.path.abspath(__file__))
MEAN, STD = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]


def trial(args):
    """One fold's trial: train, then evaluate; one JSON line."""
    import torch
    from torch import nn

    import tsock

    torch.manual_seed(args.fold)
    train, val = tsock.kfold(args.train, args.eval, args.fold, args.folds, mean=MEAN, std=STD,
                             name=f"fold-{args.fold}")
    classes = len(train.consumer.classes)
    # Every trial joins before any reads: each then reads the epochs the
    # others read, and the producers make each sample once per epoch.
    while not os.path.exists(args.go):
        time.sleep(0.02)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    seen = 0
    for _ in range(args.epochs):
        for images, labels in train:
            loss = nn.functional.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += len(labels)
    right = total = 0
    with torch.no_grad():
        for images, labels in val:
            right += (model(images).argmax(1) == labels).sum().item()
            total += len(labels)
    print(json.dumps({"fold": args.fold, "accuracy": right / max(total, 1), "trained": seen, "validated": total}))


def main(args):
    tsock_bin = args.tsock or os.environ.get("TSOCK_BIN") or "tsock"
    work = tempfile.mkdtemp(prefix="tsock-kfold-")
    data = os.path.join(work, "data")
    subprocess.run([tsock_bin, "gendata", data, "--images", str(args.images), "--classes", "4",
                    "--min-side", "48", "--max-side", "96"], check=True, stdout=subprocess.DEVNULL)
    common = ["--source", data, "--image-size", "32", "--batch-size", "16", "--seed", "3"]
    mounts, daemons, trials = {}, [], []
    try:
        for kind, extra in (("train", ["--epochs", str(args.epochs)]), ("eval", ["--transform", "eval", "--epochs", "1"])):
            mounts[kind] = os.path.join(work, kind)
            daemons.append(demo_mount.mount(tsock_bin, mounts[kind], [*common, *extra], "kfold"))
        go = os.path.join(work, "go")
        for k in range(1, args.folds + 1):
            trials.append(subprocess.Popen([sys.executable, __file__, "--trial", "--fold", str(k), "--folds", str(args.folds),
                                            "--epochs", str(args.epochs), "--train", mounts["train"], "--eval", mounts["eval"],
                                            "--go", go], stdout=subprocess.PIPE, text=True))
        while any(len(os.listdir(os.path.join(m, "consumers"))) < args.folds for m in mounts.values()):
            if any(p.poll() is not None for p in trials):
                sys.exit("kfold: a trial exited before joining")
            time.sleep(0.02)
        open(go, "w").close()
        folds = []
        for p in trials:
            out = p.communicate()[0]
            if p.returncode != 0:
                sys.exit(f"kfold: a trial failed (exit {p.returncode})")
            folds.append(json.loads(out))
        n = args.images
        print(json.dumps({
            "folds": folds,
            "decoded": {"train": demo_mount.decoded(mounts["train"]), "eval": demo_mount.decoded(mounts["eval"])},
            # One DataLoader per trial and mount: each decodes its fold's
            # training part every epoch, and its holdout once.
            "dataloaders_would_decode": {"train": args.epochs * sum(f["trained"] // args.epochs for f in folds),
                                         "eval": sum(f["validated"] for f in folds)},
            "images": n,
        }))
    finally:
        demo_mount.stop(trials, daemons, mounts.values())
        subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=300)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--tsock")
    ap.add_argument("--trial", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--fold", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--train", help=argparse.SUPPRESS)
    ap.add_argument("--eval", help=argparse.SUPPRESS)
    ap.add_argument("--go", help=argparse.SUPPRESS)
    a = ap.parse_args()
    trial(a) if a.trial else main(a)
