#!/usr/bin/python3
"""The baselines tsock is measured against, on the same folder.

    bench_torchvision.py percore DIR [ROUNDS]
        one process, one thread: RandomResizedCrop(224) + flip +
        PILToTensor per image; prints images/s.
    bench_torchvision.py loader DIR WORKERS BATCH [EPOCHS [PART]]
        torchvision DataLoader epochs (default 2), touching every byte;
        prints one JSON object: images, and the wall-clock start (before
        the DataLoader is built) and end, for a whole-run rate over
        several processes side by side (the sharing comparison). PART,
        "fold K/N" or "holdout K/N", loads only that part: sample i is in
        fold i mod N (the same work as tsock's seeded folds).
"""
import json
import sys
import time

import torch
from torchvision import datasets, transforms

TRAIN = transforms.Compose([
    transforms.RandomResizedCrop(224),
    transforms.RandomHorizontalFlip(),
    transforms.PILToTensor(),
])


def percore(folder, rounds=2):
    torch.set_num_threads(1)
    ds = datasets.ImageFolder(folder, transform=TRAIN)
    for i in range(min(10, len(ds))):
        ds[i]
    start, n = time.perf_counter(), 0
    for _ in range(rounds):
        for i in range(len(ds)):
            ds[i]
            n += 1
    print(round(n / (time.perf_counter() - start), 1))


def loader(folder, workers, batch, epochs=2, part=None):
    torch.set_num_threads(1)
    start, n = time.time(), 0
    ds = datasets.ImageFolder(folder, transform=TRAIN)
    if part:
        kind, kn = part.split()
        k, folds = (int(x) for x in kn.split("/"))
        keep = [i for i in range(len(ds)) if (i % folds == k - 1) == (kind == "holdout")]
        ds = torch.utils.data.Subset(ds, keep)
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers)
    for _ in range(epochs):
        for images, labels in dl:
            int(images.max())  # touch every byte, as the tsock readers do
            n += len(labels)
    print(json.dumps({"images": n, "start": start, "end": time.time()}))


if __name__ == "__main__":
    if sys.argv[1] == "percore":
        percore(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2)
    else:
        loader(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else 2,
               sys.argv[6] if len(sys.argv) > 6 else None)
