#!/usr/bin/python3
"""One rank of a data-parallel trial, reading its share of each epoch as
fast as it can (every byte touched, no training): the DDP benchmark's two
sides.

    bench_ddp.py tsock MOUNT GROUP RANK WORLD BATCH
        rank RANK of WORLD of the group GROUP on a tsock mount, BATCH
        images a rank's batch; every epoch the mount makes.
    bench_ddp.py loader DIR RANK WORLD BATCH EPOCHS WORKERS
        the same rank with its own torchvision DataLoader (WORKERS worker
        processes) and DistributedSampler (shuffle, the same seed on every
        rank, as torch's DDP recipes have it) over an ImageFolder.

Prints one JSON object: images, the wall-clock start (before the reader
is made) and end, and each epoch's dataset indices in the order read, for
a whole-run rate over all ranks of all trials and an exactness check
(scripts/bench_ddp.sh).
"""
import json
import sys
import time


def tsock_rank(mount, group, rank, world, batch):
    import tsock
    start, n, epochs = time.time(), 0, []
    with tsock.Consumer(mount, name=group, rank=rank, world=world, batch_size=batch) as c:
        for epoch in c.epochs():
            seen = []
            for b in epoch:
                int(b["images"].max())  # touch every byte
                n += len(b["labels"])
                seen += c.indices.tolist()
            epochs.append(seen)
    print(json.dumps({"images": n, "start": start, "end": time.time(), "epochs": epochs}))


def loader_rank(folder, rank, world, batch, nepochs, workers):
    import torch
    from torchvision import datasets, transforms
    torch.set_num_threads(1)
    start, n, epochs = time.time(), 0, []
    train = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                                transforms.PILToTensor()])
    ds = datasets.ImageFolder(folder, transform=train)
    sampler = torch.utils.data.distributed.DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=0)
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=workers,
                                     persistent_workers=workers > 0)
    for e in range(nepochs):
        sampler.set_epoch(e)
        epochs.append(list(sampler))
        for images, labels in dl:
            int(images.max())  # touch every byte, as the tsock side does
            n += len(labels)
    print(json.dumps({"images": n, "start": start, "end": time.time(), "epochs": epochs}))


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "tsock":
        tsock_rank(a[1], a[2], int(a[3]), int(a[4]), int(a[5]))
    else:
        loader_rank(a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5]), int(a[6]))
