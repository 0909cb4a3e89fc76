#!/usr/bin/python3
"""Trains a small CNN on CPU: from a tsock mount, or (for comparison) from
an image folder through its own torchvision DataLoader.

    train_torch.py --mount MNT [--lr 0.05] [--epochs 1] [--name NAME]
    train_torch.py --folder DIR --image-size 96 [--workers 2] [--batch-size 64] [--lr 0.05]

Prints one JSON line: the mean loss of the first and of the last five
steps, steps, images, seconds and images/s.
"""
import argparse
import json
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import tsock  # noqa: E402

MEAN, STD = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]


def model(classes):
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes),
    )


def tsock_batches(args):
    """The five-line drop-in: a loader that yields (images, labels)."""
    loader = tsock.torch_loader(args.mount, mean=MEAN, std=STD, name=args.name)
    status = dict(line.split(": ", 1) for line in open(os.path.join(args.mount, "status")).read().splitlines() if ": " in line)
    return loader, int(status["classes"])


def folder_batches(args):
    from torchvision import datasets, transforms

    tf = transforms.Compose([
        transforms.RandomResizedCrop(args.image_size), transforms.RandomHorizontalFlip(), transforms.PILToTensor(),
    ])
    ds = datasets.ImageFolder(args.folder, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    mean, std = torch.tensor(MEAN).view(1, 3, 1, 1), torch.tensor(STD).view(1, 3, 1, 1)

    class Normalized:
        def __iter__(self):
            for images, labels in dl:
                yield (images.float().div_(255) - mean) / std, labels

    return Normalized(), len(ds.classes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--mount", help="a tsock mountpoint")
    src.add_argument("--folder", help="an ImageFolder, read by a torchvision DataLoader")
    ap.add_argument("--name", help="tsock consumer name (unique by default)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--image-size", type=int, default=96, help="with --folder")
    ap.add_argument("--batch-size", type=int, default=64, help="with --folder")
    ap.add_argument("--workers", type=int, default=2, help="with --folder")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the model")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    loader, classes = tsock_batches(args) if args.mount else folder_batches(args)
    net = model(classes)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    losses, images = [], 0
    start = time.perf_counter()
    for _ in range(args.epochs):
        for x, y in loader:
            loss = loss_fn(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            images += len(y)
    seconds = time.perf_counter() - start
    k = min(5, len(losses))
    print(json.dumps({
        "first_loss": round(sum(losses[:k]) / max(k, 1), 4), "last_loss": round(sum(losses[-k:]) / max(k, 1), 4),
        "steps": len(losses), "images": images, "seconds": round(seconds, 2),
        "images_per_s": round(images / max(seconds, 1e-9), 1),
    }))


if __name__ == "__main__":
    main()
