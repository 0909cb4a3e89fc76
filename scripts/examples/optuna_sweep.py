#!/usr/bin/env python3
"""A hyper-parameter sweep as users run it: an Optuna study (Debian's
python3-optuna) with a MedianPruner, TRIALS trials in WORKERS processes
sharing one SQLite storage, a small CNN per trial, validation after every
epoch. Fed by two tsock mounts of one folder (a training mount, and an
eval mount that decodes the validation set once: --keep), or, with
--loaders, by each trial's own torchvision DataLoaders, for comparison.

    optuna_sweep.py [--images 200] [--trials 8] [--workers 4] [--epochs 3] [--loaders] [--data DIR] [--tsock BIN]

A trial is two loaders, the class count from MOUNTPOINT/classes, and
the loop; a pruned trial closes its loaders, which leaves the mounts:

    train = tsock.torch_loader(train_mount, name=f"trial-{trial.number}", mean=MEAN, std=STD)
    val = tsock.torch_loader(eval_mount, name=f"val-{trial.number}", mean=MEAN, std=STD)
    model = cnn(len(train.consumer.classes))
    for epoch in range(epochs):
        fit(model, train); accuracy = evaluate(model, val)   # one pass each: one epoch of each consumer
        trial.report(accuracy, epoch)
        if trial.should_prune(): close both; raise optuna.TrialPruned()

Prints one JSON line: the mode, trials completed and pruned, the best
accuracy, the sweep's wall time, the training images delivered to all
trials, and (tsock) what each mount decoded.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import demo_mount  # noqa: E402  (next to this file)

MEAN, STD = [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]


def cnn(classes):
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes),
    )


def fit(model, opt, loader):
    """One pass; returns the images trained on."""
    from torch import nn

    model.train()
    n = 0
    for images, labels in loader:
        loss = nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        n += len(labels)
    return n


def evaluate(model, loader):
    import torch

    model.eval()
    right = total = 0
    with torch.no_grad():
        for images, labels in loader:
            right += (model(images).argmax(1) == labels).sum().item()
            total += len(labels)
    return right / max(total, 1)


def loaders(args, trial):
    """The trial's two loaders and its class count, and how to close them."""
    if args.loaders:
        import torch
        from torchvision import datasets, transforms

        norm = transforms.Normalize(MEAN, STD)
        train = datasets.ImageFolder(args.data, transforms.Compose([
            transforms.RandomResizedCrop(32), transforms.RandomHorizontalFlip(), transforms.ToTensor(), norm]))
        val = datasets.ImageFolder(args.data, transforms.Compose([
            transforms.Resize(37), transforms.CenterCrop(32), transforms.ToTensor(), norm]))
        workers = max(1, (os.cpu_count() or 1) // args.workers)
        dl = lambda ds, shuffle: torch.utils.data.DataLoader(ds, batch_size=32, shuffle=shuffle, num_workers=workers)
        return dl(train, True), dl(val, False), len(train.classes), lambda: None
    import tsock

    train = tsock.torch_loader(args.train, name=f"trial-{trial.number}", mean=MEAN, std=STD)
    val = tsock.torch_loader(args.eval, name=f"val-{trial.number}", mean=MEAN, std=STD)

    def close():
        train.consumer.close()
        val.consumer.close()

    return train, val, len(train.consumer.classes), close


def objective(args):
    def run(trial):
        import optuna
        import torch

        torch.manual_seed(trial.number)
        torch.set_num_threads(1)
        train, val, classes, close = loaders(args, trial)
        try:
            model = cnn(classes)
            opt = torch.optim.SGD(model.parameters(), lr=trial.suggest_float("lr", 1e-3, 0.3, log=True), momentum=0.9)
            accuracy, trained = 0.0, 0
            for epoch in range(args.epochs):
                trained += fit(model, opt, train)
                trial.set_user_attr("trained", trained)  # images delivered to it, pruned or not
                accuracy = evaluate(model, val)
                trial.report(accuracy, epoch)
                if trial.should_prune():
                    raise optuna.TrialPruned()
            return accuracy
        finally:
            close()  # a pruned trial leaves the mounts at once
    return run


def worker(args):
    """One worker process: its share of the study's trials."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name="sweep", storage=args.storage)
    study.optimize(objective(args), n_trials=args.share)


def main(args):
    import optuna

    tsock_bin = args.tsock or os.environ.get("TSOCK_BIN") or "tsock"
    work = tempfile.mkdtemp(prefix="tsock-optuna-")
    if not args.data:
        args.data = os.path.join(work, "data")
        subprocess.run([tsock_bin, "gendata", args.data, "--images", str(args.images), "--classes", "4",
                        "--min-side", "48", "--max-side", "96"], check=True, stdout=subprocess.DEVNULL)
    storage = "sqlite:///" + os.path.join(work, "study.db")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.create_study(study_name="sweep", storage=storage, direction="maximize",
                        sampler=optuna.samplers.TPESampler(seed=1),
                        pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1))
    mounts, daemons, procs = {}, [], []
    start = time.time()
    try:
        if not args.loaders:
            common = ["--source", args.data, "--image-size", "32", "--batch-size", "32", "--epochs", str(args.epochs)]
            for kind, extra in (("train", []), ("eval", ["--transform", "eval"])):
                mounts[kind] = os.path.join(work, kind)
                daemons.append(demo_mount.mount(tsock_bin, mounts[kind], [*common, *extra], "optuna_sweep"))
        share = -(-args.trials // args.workers)
        for _ in range(args.workers):
            cmd = [sys.executable, __file__, "--worker", "--storage", storage, "--share", str(share),
                   "--epochs", str(args.epochs), "--data", args.data, "--workers", str(args.workers)]
            if args.loaders:
                cmd.append("--loaders")
            else:
                cmd += ["--train", mounts["train"], "--eval", mounts["eval"]]
            procs.append(subprocess.Popen(cmd))
        for p in procs:
            if p.wait() != 0:
                sys.exit(f"optuna_sweep: a worker failed (exit {p.returncode})")
        seconds = time.time() - start
        study = optuna.load_study(study_name="sweep", storage=storage)
        states = [t.state for t in study.trials]
        out = {
            "mode": "loaders" if args.loaders else "tsock",
            "completed": sum(s == optuna.trial.TrialState.COMPLETE for s in states),
            "pruned": sum(s == optuna.trial.TrialState.PRUNED for s in states),
            "best": study.best_value, "seconds": round(seconds, 2), "images": args.images, "epochs": args.epochs,
        }
        out["trained"] = sum(t.user_attrs.get("trained", 0) for t in study.trials)
        if not args.loaders:
            out["decoded"] = {kind: demo_mount.decoded(m) for kind, m in mounts.items()}
        print(json.dumps(out))
    finally:
        demo_mount.stop(procs, daemons, mounts.values())
        subprocess.run(["rm", "-rf", work], check=False)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=200)
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--loaders", action="store_true", help="each trial's own torchvision DataLoaders instead of tsock")
    ap.add_argument("--data", help="an ImageFolder (default: tsock gendata IMAGES)")
    ap.add_argument("--tsock")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--storage", help=argparse.SUPPRESS)
    ap.add_argument("--share", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--train", help=argparse.SUPPRESS)
    ap.add_argument("--eval", help=argparse.SUPPRESS)
    a = ap.parse_args()
    worker(a) if a.worker else main(a)
