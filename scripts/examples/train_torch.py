#!/usr/bin/env python3
"""Trains an image classifier from a tsock mount or, for comparison, from
an image folder through its own torchvision DataLoader; on the CPU (a
small CNN) or on a GPU (ResNet-18, bf16 autocast, channels-last).

    train_torch.py --mount MNT [--lr 0.05] [--epochs 1] [--name NAME]
    train_torch.py --mount MNT --device cuda [--via cuda|host]
    train_torch.py --folder DIR --image-size 96 [--workers 2] [--batch-size 64] [--device cuda]

--via cuda takes the batches tsock already holds on the GPU (tsock mount
--device; CUDA IPC, no copy); --via host reads the batch files and copies
them up (tsock.torch_loader). Prints one JSON line: the mean loss of the
first and of the last five steps, steps, images, seconds, images/s, and
the wall-clock start and end (for aggregates over several trials).
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

MEAN, STD = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]


def model(classes, device):
    if device.type == "cpu":
        return nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes),
        )
    from torchvision.models import resnet18

    return resnet18(num_classes=classes).to(device, memory_format=torch.channels_last)


def classes_of(mount):
    with open(os.path.join(mount, "status")) as f:
        status = dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line)
    return int(status["classes"])


class Normalize:
    """uint8 NCHW images on the device → float, normalized there."""

    def __init__(self, device):
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=device).view(1, 3, 1, 1)

    def __call__(self, images):
        return (images.float().div_(255) - self.mean) / self.std


def tsock_host(args, device):
    """The five-line drop-in: a loader that yields (images, labels)."""
    return tsock.torch_loader(args.mount, device=device, mean=MEAN, std=STD, name=args.name)


class TsockCUDA:
    """Batches already on the GPU, in tsock's memory: each pass is an epoch."""

    def __init__(self, args, device):
        self.consumer = tsock.cuda_batches(args.mount, name=args.name)
        self.epochs, self.device, self.normalize = self.consumer.epochs(), device, Normalize(device)

    def __iter__(self):
        for b in next(self.epochs):
            images = torch.as_tensor(b["images"], device=self.device)  # zero copy
            if b.meta.get("layout") == "nhwc":
                images = images.permute(0, 3, 1, 2)
            labels = torch.as_tensor(b["labels"], device=self.device)
            # The normalized copy is the model's; the batch is released
            # (after the GPU is done with it) once b and the views go.
            yield self.normalize(images), labels.clone()
            del b, images, labels


class Folder:
    """Its own torchvision DataLoader: decode and augment in its workers."""

    def __init__(self, args, device):
        from torchvision import datasets, transforms

        tf = transforms.Compose([
            transforms.RandomResizedCrop(args.image_size), transforms.RandomHorizontalFlip(), transforms.PILToTensor(),
        ])
        self.ds = datasets.ImageFolder(args.folder, transform=tf)
        self.dl = torch.utils.data.DataLoader(self.ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                                              pin_memory=device.type == "cuda", persistent_workers=args.workers > 0)
        self.device, self.normalize = device, Normalize(device)

    def __iter__(self):
        for images, labels in self.dl:
            yield self.normalize(images.to(self.device, non_blocking=True)), labels.to(self.device, non_blocking=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--mount", help="a tsock mountpoint")
    src.add_argument("--folder", help="an ImageFolder, read by a torchvision DataLoader")
    ap.add_argument("--name", help="tsock consumer name (unique by default)")
    ap.add_argument("--device", default="cpu", help="cpu (a small CNN) or cuda (ResNet-18)")
    ap.add_argument("--via", choices=["host", "cuda"], default="host",
                    help="with --mount: batch files copied up (host) or tsock's GPU batches (cuda)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--image-size", type=int, default=96, help="with --folder")
    ap.add_argument("--batch-size", type=int, default=64, help="with --folder")
    ap.add_argument("--workers", type=int, default=2, help="with --folder")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for the model")
    ap.add_argument("--go", help="start when this file exists (benchmarks: trials launched together)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    demo_mount.start_together(args.go)
    start, wall = time.perf_counter(), time.time()
    if args.mount:
        classes = classes_of(args.mount)
        loader = TsockCUDA(args, device) if args.via == "cuda" else tsock_host(args, device)
    else:
        loader = Folder(args, device)
        classes = len(loader.ds.classes)
    net = model(classes, device)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    losses, images = [], 0
    for _ in range(args.epochs):
        for x, y in loader:
            if device.type == "cuda":
                x = x.contiguous(memory_format=torch.channels_last)
            with autocast:
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
        "images_per_s": round(images / max(seconds, 1e-9), 1), "start": wall, "end": wall + seconds,
    }))


if __name__ == "__main__":
    main()
