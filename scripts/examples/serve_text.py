#!/usr/bin/env python3
"""Token batches of variable length, shared without padding; each consumer
reads them in its own batch size.

The dataset: the lines of a text file, byte-level tokens (a line's UTF-8
bytes as int32 ids, as ByT5 does). A batch is {"tokens": ragged,
"length": [B]}: the list of per-sample arrays is published as one tensor
plus tokens.offsets, and consumers get it back as a tsock.Ragged
(tokens[i] is sample i, zero copy), re-cut to their own batch size.

    serve_text.py demo [--text FILE] [--epochs 2] [--sizes 32,7,100] [--tsock BIN]
        mounts `tsock mount --ingest --samples N`, starts one consumer
        process per batch size, serves, and checks that every consumer's
        every epoch held each line exactly once, byte for byte, in batches
        of its own size; prints one JSON line (exit 1 if not)
    serve_text.py serve MOUNT [--text FILE] [--epochs E]   the producer alone
    serve_text.py read MOUNT --batch-size B [--text FILE]  one consumer
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
import tsock  # noqa: E402

import demo_mount  # noqa: E402  (next to this file)

DEFAULT_TEXT = os.path.join(HERE, "..", "..", "README.md")


class Lines:
    """A map-style dataset: line i of a text file as byte-level tokens."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.lines = [line for line in f.read().split(b"\n") if line.strip()]

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, i):
        return np.frombuffer(self.lines[i], np.uint8).astype(np.int32)


def collate(samples):
    # A list of arrays in a dict is one ragged tensor: no padding.
    return {"tokens": samples, "length": np.array([len(s) for s in samples], np.int64)}


def serve(args):
    tsock.serve(args.mount, Lines(args.text), batch_size=args.batch_size, collate_fn=collate, epochs=args.epochs)


def read(args):
    """A consumer in its own batch size; checks each sample against the
    line its index names."""
    lines = Lines(args.text)
    report = {"batch_size": args.batch_size, "epochs": [], "sizes": set(), "wrong": 0}
    with tsock.Consumer(args.mount, batch_size=args.batch_size) as c:
        for epoch in c.epochs():
            seen, tokens = [], 0
            for batch in epoch:
                toks, length = batch["tokens"], batch["length"]
                report["sizes"].add(len(toks))
                for i, idx in enumerate(c.indices):
                    sample = toks[i]
                    if len(sample) != length[i] or sample.tobytes() != lines[idx].tobytes():
                        report["wrong"] += 1
                    tokens += len(sample)
                seen += c.indices.tolist()
            report["epochs"].append({"samples": len(seen), "distinct": len(set(seen)), "tokens": tokens})
    report["sizes"] = sorted(report["sizes"])
    print(json.dumps(report), flush=True)


def demo(args):
    lines = Lines(args.text)
    n, total = len(lines), sum(len(x) for x in lines.lines)
    readers = [[sys.executable, __file__, "read", None, "--batch-size", b, "--text", args.text]
               for b in args.sizes.split(",")]

    def serve_all(mnt):
        args.mount = mnt
        serve(args)

    reports = demo_mount.run("serve_text", args.tsock, ["--ingest", "--samples", str(n), "--batch-size",
                             str(args.batch_size), "--epochs", str(args.epochs), "--buffer", "64MiB"],
                             readers, serve_all)
    ok = all(r["wrong"] == 0 and len(r["epochs"]) == args.epochs and max(r["sizes"]) <= r["batch_size"] and
             all(e["samples"] == n and e["distinct"] == n and e["tokens"] == total for e in r["epochs"])
             for r in reports)
    print(json.dumps({"lines": n, "tokens": total, "consumers": reports, "exact": ok}))
    if not ok:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    for name, fn, positional in (("demo", demo, []), ("serve", serve, ["mount"]), ("read", read, ["mount"])):
        p = sub.add_parser(name)
        for pos in positional:
            p.add_argument(pos)
        p.set_defaults(fn=fn)
        p.add_argument("--text", default=DEFAULT_TEXT, help="a text file: one sample per non-empty line")
        p.add_argument("--epochs", type=int, default=2)
        p.add_argument("--batch-size", type=int, default=32, help="the producer's (serve, demo) or the consumer's (read)")
        p.add_argument("--sizes", default="32,7,100", help="demo: the consumers' own batch sizes")
        p.add_argument("--tsock", help="the tsock binary (default $TSOCK_BIN, else tsock on PATH)")
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
