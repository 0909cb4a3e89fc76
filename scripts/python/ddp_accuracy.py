"""Trains one data-parallel trial (torch DDP, the gloo backend on CPU) of
WORLD ranks, from torch's DistributedSampler over an ImageFolder and from
one tsock mount whose ranks join as a group, and compares validation
accuracy, seed by seed; checks that every epoch of the tsock side dealt
each sample to exactly one rank (the padding aside) and that every rank
took the same number of steps. No run may hang: a rank that has not
finished in --timeout seconds fails the run.

    ddp_accuracy.py --train DIR --val DIR [--world 2] [--nodes 1] [--sides sampler,tsock]
        [--seeds 3] [--epochs 4] [--image-size 32] [--batch-size 16] [--tsock BIN]

Sides, each trained once per seed (the seed sets the weights and the
loader's order and crops):
  sampler  ImageFolder(DIR), RandomResizedCrop + flip, DistributedSampler
           (shuffle, set_epoch each epoch, padding), batch size per rank
  tsock    tsock mount --source DIR, each rank tsock.torch_loader(rank=,
           world=): one decode for the whole trial; with --nodes N, N
           daemons as N nodes (--node K/N, each its own mount), rank r
           reading node r // (world/N)'s mount, as one tsock a node of a
           multi-node job serves its ranks
Prints a JSON line per run, then a table of each side's mean accuracy
(min-max) and its difference from the sampler's, over the seeds.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def evaluate(net, args):
    """accuracy.evaluate's validation, read in this process: a DataLoader
    worker forked beside gloo's threads may hang."""
    import torch
    from torchvision import datasets, transforms

    import accuracy
    tf = transforms.Compose([transforms.Resize(round(args.image_size / 0.875)), transforms.CenterCrop(args.image_size),
                             transforms.PILToTensor()])
    dl = torch.utils.data.DataLoader(datasets.ImageFolder(args.val, transform=tf), batch_size=256, num_workers=0)
    net.eval()
    right = total = 0
    with torch.no_grad():
        for x, y in dl:
            right += (net(accuracy.normalize(x)).argmax(1) == y).sum().item()
            total += len(y)
    return right / total


def rank_main(args):
    """One rank: trains, and rank 0 prints the run's JSON line."""
    import torch
    import torch.distributed as dist
    from torch import nn

    import accuracy  # the same model, normalization and validation
    import tsock

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    classes = len([d for d in os.listdir(args.train) if os.path.isdir(os.path.join(args.train, d))])
    net = nn.parallel.DistributedDataParallel(accuracy.model(classes))
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=5e-4)
    seen, steps = [], []
    if args.side == "sampler":
        from torchvision import datasets, transforms
        tf = transforms.Compose([transforms.RandomResizedCrop(args.image_size), transforms.RandomHorizontalFlip(),
                                 transforms.PILToTensor()])
        ds = datasets.ImageFolder(args.train, transform=tf)
        sampler = torch.utils.data.distributed.DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True,
                                                                  seed=args.seed)
        dl = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, sampler=sampler, num_workers=1,
                                         persistent_workers=True)

        def epoch_batches(e):
            sampler.set_epoch(e)
            order = list(sampler)
            for k, (x, y) in enumerate(dl):
                yield accuracy.normalize(x), y, order[k * args.batch_size:(k + 1) * args.batch_size]
        loader = None
    else:
        loader = tsock.torch_loader(args.mount, mean=accuracy.MEAN, std=accuracy.STD, name="ddp", rank=rank,
                                    world=world, batch_size=args.batch_size)

        def epoch_batches(e):
            for x, y in loader:
                yield x, y, loader.indices.tolist()
    for e in range(args.epochs):
        net.train()
        mine, n = [], 0
        for x, y, idx in epoch_batches(e):
            opt.zero_grad()
            nn.functional.cross_entropy(net(x), y).backward()  # DDP all-reduces here: a rank short of a step hangs
            opt.step()
            mine += idx
            n += 1
        seen.append(mine)
        steps.append(n)
    if loader is not None:
        loader.close()
    everyone = [None] * world
    dist.all_gather_object(everyone, (seen, steps))
    if rank == 0:
        exact = True
        for e in range(args.epochs):
            union = [i for s, _ in everyone for i in s[e]]
            exact &= set(union) == set(range(args.samples)) and len(union) - args.samples < world
            exact &= len({st[e] for _, st in everyone}) == 1
        acc = evaluate(net.module, args)
        print(json.dumps({"side": args.side, "seed": args.seed, "world": world, "accuracy": acc, "exact": exact,
                          "steps": steps}), flush=True)
    # Out without the process group's teardown: torch 1.13's gloo
    # destructor can deadlock with the DDP reducer's thread at exit (seen
    # here, one run in a few, in ~ProcessGroupGloo). The barrier first:
    # no rank leaves while another still talks to it.
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


def run(args, side, seed):
    """Starts the mount (tsock side) and the ranks; rank 0's JSON line."""
    mounts, procs = [], []
    nodes = args.nodes if side == "tsock" else 1
    if side == "tsock":
        for k in range(nodes):
            mount = tempfile.mkdtemp(prefix="tsock-ddp-")
            proc = subprocess.Popen([args.tsock, "mount", mount, "--source", args.train, "--image-size", str(args.image_size),
                                     "--batch-size", str(args.batch_size), "--epochs", str(args.epochs), "--seed", str(seed),
                                     "--workers", "2", "--node", f"{k}/{nodes}"], stdout=subprocess.PIPE, text=True)
            mounts.append(mount)
            procs.append(proc)
            line = proc.stdout.readline()
            if not line.startswith("tsock: mounted"):
                sys.exit(f"ddp_accuracy: tsock mount (node {k} of {nodes}) did not come up: {line!r}")
    samples = sum(len(f) for _, _, f in os.walk(args.train))
    env = {**os.environ, "WORLD_SIZE": str(args.world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    ranks = [subprocess.Popen([sys.executable, __file__, "--rank-main", "--side", side, "--seed", str(seed), "--train", args.train,
                               "--val", args.val, "--epochs", str(args.epochs), "--image-size", str(args.image_size),
                               "--batch-size", str(args.batch_size), "--lr", str(args.lr), "--samples", str(samples),
                               "--mount", mounts[r * nodes // args.world] if mounts else ""],
                              env={**env, "RANK": str(r)}, stdout=subprocess.PIPE, text=True) for r in range(args.world)]
    try:
        deadline = time.monotonic() + args.timeout
        outs = []
        for p in ranks:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
            if p.returncode != 0:
                sys.exit(f"ddp_accuracy: a rank of {side} seed {seed} failed (exit {p.returncode})")
            outs.append(out)
    except subprocess.TimeoutExpired:
        sys.exit(f"ddp_accuracy: {side} seed {seed} did not finish in {args.timeout} s: a hang")
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.wait()
        for proc, mount in zip(procs, mounts):
            proc.send_signal(signal.SIGTERM)
            proc.wait()
            os.rmdir(mount)
    r = json.loads(next(line for line in outs[0].splitlines() if line.startswith("{")))
    r["nodes"] = nodes
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--val", required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=1, help="tsock daemons as nodes (--node K/N); world a multiple of it")
    ap.add_argument("--sides", default="sampler,tsock")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=16, help="each rank's")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--tsock", default=os.environ.get("TSOCK_BIN", "tsock"))
    # A rank's own arguments (the driver passes them).
    ap.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--samples", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--mount", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_main:
        return rank_main(args)
    if args.nodes < 1 or args.world % args.nodes:
        sys.exit(f"ddp_accuracy: --world {args.world} over --nodes {args.nodes}: each node serves as many ranks")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sides = args.sides.split(",")
    acc = {s: [] for s in sides}
    for seed in range(1, args.seeds + 1):
        for side in sides:  # interleaved: each seed runs every side
            r = run(args, side, seed)
            acc[side].append(r["accuracy"])
            print(json.dumps(r), flush=True)
            if not r["exact"]:
                sys.exit(f"ddp_accuracy: {side} seed {seed}: an epoch was not dealt exactly, or ranks took different steps: {r}")
    import accuracy
    accuracy.table(acc, "sampler", f"side ({args.world} ranks)", "DistributedSampler's", args.seeds)

if __name__ == "__main__":
    main()
