"""Tests of the Python client, as installed, against real tsock mounts
(root, /dev/fuse).

    pip install scripts/python     # into a venv --system-site-packages on Debian
    cd scripts/python/tests && TSOCK_BIN=/path/to/tsock python -m unittest -v test_tsock

Without TSOCK_BIN it builds tsock with `go build`. go test runs this file
with a fresh venv (cmd/tsock/python_test.go), so scripts/test.sh does too.
"""
import io
import json
import mmap
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
import tsock  # noqa: E402

PY = sys.executable


def tsock_binary():
    if os.environ.get("TSOCK_BIN"):
        return os.environ["TSOCK_BIN"]
    out = os.path.join(tempfile.mkdtemp(prefix="tsock-bin-"), "tsock")
    subprocess.run(["go", "build", "-o", out, "./cmd/tsock"], cwd=ROOT, check=True)
    os.environ["TSOCK_BIN"] = out
    return out


def plain_read(path):
    """The client-free reader the README documents: read() and a parse."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__")
    dtypes = {"U8": np.uint8, "I64": np.int64}
    out = {}
    for name, t in header.items():
        start, end = t["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + start : 8 + n + end], dtypes[t["dtype"]]).reshape(t["shape"])
    return out, meta


class Mount:
    """A `tsock mount` in a temporary folder, stopped (and checked
    unmounted) by the test's cleanup."""

    def __init__(self, test, *args):
        self.exit_code = 0  # at SIGTERM; 1 once its producer failed
        self.test = test
        self.dir = tempfile.mkdtemp(prefix="tsock-py-")
        self.proc = subprocess.Popen([tsock_binary(), "mount", self.dir, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        test.addCleanup(self.stop, test)
        line = self.proc.stdout.readline()
        if not line.startswith("tsock: mounted"):
            test.fail(f"mount did not come up: {line!r} {self.proc.stderr.read()}")

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def watchdog(self, seconds):
        """Stops the daemon after seconds, so that a read that would wait
        forever fails the test (ESHUTDOWN) instead of hanging it."""
        import threading

        timer = threading.Timer(seconds, self.proc.send_signal, (signal.SIGTERM,))
        timer.start()
        self.test.addCleanup(timer.cancel)

    def status(self):
        with open(self.path("status")) as f:
            return f.read()

    def stop(self, test):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                test.fail("daemon did not stop in 30s after SIGTERM")
            test.assertEqual(code, self.exit_code, self.proc.stderr.read())
        self.proc.stdout.close()
        self.proc.stderr.close()
        with open("/proc/mounts") as f:
            mounted = any(line.split()[1] == self.dir for line in f)
        if mounted:
            subprocess.run(["umount", "-l", self.dir])
        test.assertFalse(mounted, "mount left behind")
        os.rmdir(self.dir)


def light(epoch):
    """An epoch's batches as copies of their labels, indices and numbers:
    what the checks need, without holding the batches (a small buffer
    would stall)."""
    out = []
    for b in epoch:
        copy = tsock.Batch({"labels": b["labels"].copy(), "indices": b["indices"].copy()}, b.meta, b.path)
        out.append(copy)
    return out


def folder(images=45, classes=4):
    """A small JPEG dataset; sample i has label i*classes//images."""
    d = tempfile.mkdtemp(prefix="tsock-data-")
    subprocess.run([tsock_binary(), "gendata", d, "--images", str(images), "--classes", str(classes),
                    "--min-side", "48", "--max-side", "96"], check=True, stdout=subprocess.DEVNULL)
    return d


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = folder()
        cls.n, cls.classes = 45, 4

    def mount(self, *args, source=None):
        return Mount(self, "--source", source or self.data, "--image-size", "32", *args)

    def check_epochs(self, epochs, batch_size, count):
        """Each epoch holds each sample exactly once, labels follow the
        folder order, batches are full but for an epoch's last."""
        self.assertEqual(len(epochs), count)
        for e, batches in enumerate(epochs):
            idx = np.concatenate([b["indices"] for b in batches])
            self.assertEqual(sorted(idx.tolist()), list(range(self.n)), f"epoch {e}")
            labels = np.concatenate([b["labels"] for b in batches])
            np.testing.assert_array_equal(labels, idx * self.classes // self.n)
            sizes = [len(b["labels"]) for b in batches]
            self.assertTrue(all(s == batch_size for s in sizes[:-1]) and 0 < sizes[-1] <= batch_size, sizes)
            self.assertEqual([b.epoch for b in batches], [e] * len(batches))
            self.assertEqual([b.index for b in batches], list(range(len(batches))))

    def test_epochs_are_exact_and_bytes_match_a_plain_reader(self):
        m = self.mount("--batch-size", "8", "--epochs", "2")
        os.mkdir(m.path("consumers", "plain"))
        with tsock.Consumer(m.dir) as c:
            epochs = [list(e) for e in c.epochs()]
            self.assertEqual(c.epoch, 1)
        self.check_epochs(epochs, 8, 2)
        plain = []
        while True:
            try:
                plain.append(plain_read(m.path("consumers", "plain", "%06d.safetensors" % len(plain)))[0])
            except FileNotFoundError:
                break
        flat = [b for e in epochs for b in e]
        self.assertEqual(len(flat), len(plain))
        for ours, theirs in zip(flat, plain):
            for k in ("images", "labels", "indices"):
                np.testing.assert_array_equal(ours[k], theirs[k])

    def test_a_timeout_reads_what_no_timeout_reads(self):
        """A consumer with a timeout waits for batches as they come (its
        own batch size too) and reads exact epochs: the bound is for a
        producer that stopped, not for a slow one."""
        m = self.mount("--batch-size", "8", "--epochs", "2")
        with tsock.Consumer(m.dir, batch_size=5, timeout=60) as c:
            epochs = [light(e) for e in c.epochs()]
        self.check_epochs(epochs, 5, 2)

    def test_arrays_are_the_mapped_file(self):
        m = self.mount("--batch-size", "8")
        for writable in (False, True):
            with tsock.Consumer(m.dir, writable=writable) as c:
                b = next(iter(c))
                images = b["images"]
                base = images
                while not isinstance(base, mmap.mmap):
                    base = base.obj if isinstance(base, memoryview) else base.base
                    self.assertIsNotNone(base, "the array does not view the batch's mapping")
                start = np.frombuffer(base, np.uint8).__array_interface__["data"][0]
                addr = images.__array_interface__["data"][0]
                self.assertEqual(addr, start + 4096 + 16 * 8, "images start right after the 4096-byte header and labels")
                self.assertEqual(addr % 4096, 128)
                if not writable:
                    with self.assertRaises(ValueError):
                        images[0, 0, 0, 0] = 0  # read-only: the memory is everyone's
                    continue
                images[0, 0, 0, 0] ^= 0xFF  # copy-on-write: ours alone
                again, _ = plain_read(b.path)
                self.assertNotEqual(again["images"][0, 0, 0, 0], images[0, 0, 0, 0])

    def test_ranks_of_a_group_are_dealt_each_epoch(self):
        """Two ranks of one training (threads here, processes in DDP) read
        each epoch between them: every sample once (45 is odd: one
        padded, as DistributedSampler pads), the same number of batches
        of their batch size, a new deal each epoch; a third rank, a world
        that disagrees, or a number claimed twice is refused, saying so."""
        import threading

        m = self.mount("--batch-size", "8", "--epochs", "2")
        m.watchdog(120)
        got, errs = {}, []
        ranks = [tsock.Consumer(m.dir, name="trial", rank=r, world=2, batch_size=5, timeout=60) for r in range(2)]
        with self.assertRaisesRegex(tsock.TsockError, "claimed already"):
            tsock.Consumer(m.dir, name="trial", rank=1, world=2, batch_size=5)
        with self.assertRaisesRegex(tsock.TsockError, "world '3', the group has '2'"):
            tsock.Consumer(m.dir, name="trial", rank=2, world=3, batch_size=5)
        with self.assertRaisesRegex(tsock.TsockError, "batch_size '4', the group has '5'"):
            tsock.Consumer(m.dir, name="trial", rank=0, world=2, batch_size=4)

        def read(r):
            try:
                with ranks[r] as c:
                    got[r] = [light(e) for e in c.epochs()]
            except Exception as e:  # noqa: BLE001 (reported below)
                errs.append(e)

        threads = [threading.Thread(target=read, args=(r,)) for r in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errs, [])
        self.assertEqual(len(got[0]), 2)
        for e in range(2):
            self.assertEqual(len(got[0][e]), len(got[1][e]), f"epoch {e}: the ranks took different steps")
            idx = np.concatenate([b["indices"] for r in range(2) for b in got[r][e]]).tolist()
            self.assertEqual(len(idx), 46)  # ceil(45/2) each
            self.assertEqual(sorted(set(idx)), list(range(self.n)), f"epoch {e}")
            for r in range(2):
                self.assertEqual([len(b["labels"]) for b in got[r][e][:-1]], [5] * (len(got[r][e]) - 1))
        self.assertNotEqual(np.concatenate([b["indices"] for b in got[0][0]]).tolist(),
                            np.concatenate([b["indices"] for b in got[0][1]]).tolist())
        self.assertFalse(os.path.exists(m.path("consumers", "trial")), "the last rank to leave removes the group")

    def test_rank_and_world_come_from_torchrun(self):
        from unittest import mock

        from tsock import ranks

        with mock.patch.dict(os.environ, {"RANK": "3", "WORLD_SIZE": "4", "TORCHELASTIC_RUN_ID": "abc/1"}):
            self.assertEqual(ranks.of(None, None), (3, 4))
            self.assertEqual(ranks.default_name(), "ddp-abc-1")
        with mock.patch.dict(os.environ, {"RANK": "4", "WORLD_SIZE": "4"}):
            with self.assertRaisesRegex(tsock.TsockError, "0 to world-1"):
                ranks.of(None, None)
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertEqual(ranks.of(None, None), (None, None))
            with self.assertRaisesRegex(tsock.TsockError, "give name="):
                ranks.default_name()

    def test_classes_name_the_labels(self):
        m = self.mount("--batch-size", "8")
        with tsock.Consumer(m.dir) as c:
            self.assertEqual(c.classes, sorted(os.listdir(self.data)))
            self.assertEqual(len(c.classes), self.classes)
            self.assertEqual(c.status()["state"] in ("reading", "waiting"), True)
        doc = tsock.status.read(m.dir)
        self.assertEqual(doc["classes"], self.classes)

    def test_subsets(self):
        """Folds, holdouts and lists: exact epochs of each consumer's own
        subset; a fold and its holdout split the data; bad ones raise."""
        m = self.mount("--batch-size", "8", "--epochs", "2")
        with tsock.Consumer(m.dir, subset="fold 1/3", batch_size=5) as train, \
                tsock.Consumer(m.dir, subset="holdout 1/3") as val, \
                tsock.Consumer(m.dir, subset=np.array([3, 7, 44])) as mine:
            self.assertEqual((train.subset, val.subset, mine.subset), ("fold 1/3", "holdout 1/3", "list of 3"))
            with self.assertRaises(tsock.TsockError) as e:
                mine.set_subset("fold 6/5")
            self.assertIn("Invalid argument", str(e.exception))
            self.assertEqual(mine.subset, "list of 3")
            got = {}
            for c in (train, val, mine):
                got[c] = [sorted(np.concatenate([b["indices"] for b in light(e)]).tolist()) for e in c.epochs()]
        self.assertEqual(got[mine], [[3, 7, 44]] * 2)
        for t, v in zip(got[train], got[val]):
            self.assertEqual(sorted(t + v), list(range(self.n)))
            self.assertEqual(len(v), self.n // 3)
        self.assertEqual(got[train][0], got[train][1])

    def test_own_batch_size(self):
        m = self.mount("--batch-size", "8", "--epochs", "2")
        for size in (5, 7, 16):
            with tsock.Consumer(m.dir, batch_size=size) as c:
                self.check_epochs([light(e) for e in c.epochs()], size, 2)

    def test_epochs_skipped_unfinished_are_drained(self):
        m = self.mount("--batch-size", "8", "--epochs", "3")
        with tsock.Consumer(m.dir) as c:
            seen = []
            for e in c.epochs():
                seen.append((e.number, next(e).epoch))  # one batch, then on
            self.assertEqual(seen, [(0, 0), (1, 1), (2, 2)])

    def test_torch_loader(self):
        import torch

        for layout in ("nchw", "nhwc"):
            m = self.mount("--batch-size", "8", "--layout", layout)
            os.mkdir(m.path("consumers", "ref"))
            mean, std = [0.4, 0.5, 0.6], [0.2, 0.25, 0.3]
            loader = tsock.torch_loader(m.dir, mean=mean, std=std)
            for i, (x, y) in enumerate(loader):
                ref, meta = plain_read(m.path("consumers", "ref", "%06d.safetensors" % i))
                img = ref["images"].astype(np.float32) / 255
                if layout == "nhwc":
                    img = img.transpose(0, 3, 1, 2)
                want = (img - np.array(mean, np.float32).reshape(1, 3, 1, 1)) / np.array(std, np.float32).reshape(1, 3, 1, 1)
                self.assertEqual((x.dtype, y.dtype), (torch.float32, torch.int64))
                self.assertEqual(tuple(x.shape), (len(y), 3, 32, 32))
                np.testing.assert_allclose(x.numpy(), want, rtol=1e-5, atol=1e-5)
                np.testing.assert_array_equal(y.numpy(), ref["labels"])
            with self.assertRaisesRegex(tsock.TsockError, "has read all its epochs"):
                for _ in loader:
                    pass
            loader.close()
            # dtype=None: uint8, viewing the mapping.
            raw = tsock.torch_loader(m.dir, dtype=None)
            x, y = next(iter(raw))
            self.assertEqual(x.dtype, torch.uint8)
            raw.close()

    def test_errors_are_clear(self):
        with self.assertRaisesRegex(tsock.TsockError, "not a tsock mount"):
            tsock.Consumer(tempfile.gettempdir())
        bad = tempfile.NamedTemporaryFile(suffix=".safetensors")
        for content, why in ((b"", "no safetensors header"), (struct.pack("<Q", 1 << 40), "header length"),
                             (struct.pack("<Q", 4) + b"nope", "not JSON"),
                             (struct.pack("<Q", 2) + b"{}", "no tensors")):
            bad.seek(0)
            bad.truncate()
            bad.write(content)
            bad.flush()
            with self.assertRaisesRegex(tsock.TsockError, why):
                tsock.load_batch(bad.name)
        m = self.mount("--batch-size", "8")
        with tsock.Consumer(m.dir, name="taken"):
            with self.assertRaisesRegex(tsock.TsockError, "already exists"):
                tsock.Consumer(m.dir, name="taken")
        with self.assertRaisesRegex(tsock.TsockError, "join"):
            tsock.Consumer(m.dir, name="bad/name")
        with self.assertRaisesRegex(tsock.TsockError, "batch size"):
            tsock.Consumer(m.dir, name="zero", batch_size=0)
        self.assertFalse(os.path.exists(m.path("consumers", "zero")), "a consumer that failed to set up stayed")
        c = tsock.Consumer(m.dir, name="removed")
        os.rmdir(c.dir)
        with self.assertRaisesRegex(tsock.TsockError, "is gone"):
            next(iter(c))

    def test_evicted_consumer_raises(self):
        batch = 4096 + 8 * (16 + 3 * 32 * 32)
        m = self.mount("--batch-size", "8", "--epochs", "2", "--buffer", str(2 * batch), "--consumer-timeout", "1s")
        idle = tsock.Consumer(m.dir, name="idle")
        with tsock.Consumer(m.dir, name="busy") as busy:
            self.check_epochs([light(e) for e in busy.epochs()], 8, 2)
        with self.assertRaisesRegex(tsock.TsockError, "evicted"):
            for _ in idle:
                pass
        idle.close()

    def test_holding_more_than_the_buffer_raises(self):
        """The README's own pattern of keeping every batch (mapped) past
        what the buffer holds waited forever on the next open; it raises
        once --consumer-timeout passes without progress."""
        batch = 4096 + 8 * (16 + 3 * 32 * 32)
        m = self.mount("--batch-size", "8", "--epochs", "1", "--buffer", str(3 * batch), "--consumer-timeout", "1s")
        held = []
        with tsock.Consumer(m.dir, name="hoarder") as c:
            with self.assertRaisesRegex(tsock.TsockError, "read or unlink batch 0 first"):
                for b in c:
                    held.append(b)
        self.assertEqual(len(held), 3)

    def test_killed_consumer_leaves_the_mount_healthy(self):
        batch = 4096 + 8 * (16 + 3 * 32 * 32)
        m = self.mount("--batch-size", "8", "--epochs", "2", "--buffer", str(3 * batch), "--consumer-timeout", "1s")
        victim = subprocess.Popen([PY, "-c", f"""
import sys, time, tsock
c = tsock.Consumer({m.dir!r}, name="victim")
it = iter(c)
held = [next(it), next(it)]  # mapped and open
print("holding", flush=True)
time.sleep(600)
"""], stdout=subprocess.PIPE, text=True)
        self.assertEqual(victim.stdout.readline().strip(), "holding")
        # Joined once the victim holds, and reading at once: a consumer
        # that joins while the buffer is full and reads nothing for the
        # consumer timeout is evicted itself (the victim's Python starting
        # under load took longer than 1 s; CI's parallel run met it).
        survivor = tsock.Consumer(m.dir, name="survivor")
        victim.kill()
        victim.wait()
        victim.stdout.close()
        with survivor:
            self.check_epochs([light(e) for e in survivor.epochs()], 8, 2)
        self.assertIn("victim: evicted", m.status())

    def test_leaves_at_exit(self):
        m = self.mount("--batch-size", "8")
        subprocess.run([PY, "-c", f"""
import sys, tsock
c = tsock.Consumer({m.dir!r}, name="forgetful")
next(iter(c))
"""], check=True)
        self.assertEqual(os.listdir(m.path("consumers")), [])

    def test_training_loss_falls(self):
        m = Mount(self, "--source", "synthetic:1024", "--batch-size", "32", "--image-size", "32", "--epochs", "1")
        out = subprocess.run([PY, os.path.join(ROOT, "scripts", "examples", "train_torch.py"), "--mount", m.dir],
                             check=True, capture_output=True, text=True).stdout
        r = json.loads(out)
        self.assertEqual(r["images"], 1024)
        self.assertLess(r["last_loss"], 0.5 * r["first_loss"], r)



class AccuracyTest(unittest.TestCase):
    def test_a_trial_learns_as_from_its_own_dataloader(self):
        """The same CNN, hyper-parameters and seed, trained from a
        torchvision DataLoader, from a tsock mount of the same
        class-sorted folder, and from a mount of the same images as tar
        shards written class by class with a shard memory of 4.65 shards
        (ImageNet's ratio; scripts/python/accuracy.py), reach the same
        validation accuracy within 0.1. Replacing tsock's shuffle by the
        dataset's order (one class a batch), or the shards' by their order
        (the shard disk off: --shard-disk 0), gives 0.25-0.5 here, and
        fails it."""
        train, val = tempfile.mkdtemp(prefix="tsock-acc-"), tempfile.mkdtemp(prefix="tsock-acc-")
        for d, n in ((train, 400), (val, 120)):
            subprocess.run([tsock_binary(), "gendata", d, "--images", str(n), "--classes", "8", "--min-side", "48",
                            "--max-side", "96"], check=True, stdout=subprocess.DEVNULL)
        shards, memory = _class_sorted_shards(train)
        out = subprocess.run([PY, os.path.join(ROOT, "scripts", "python", "accuracy.py"), "--train", train, "--val", val,
                              "--sides", "dataloader,folder,shards", "--shards", shards, "--shard-memory", str(memory),
                              "--seeds", "1", "--epochs", "3", "--image-size", "32",
                              "--tsock", tsock_binary()], check=True, capture_output=True, text=True).stdout
        acc = {r["side"]: r["accuracy"] for r in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}
        self.assertGreater(acc["dataloader"], 0.5, out)  # it learns at all
        self.assertGreaterEqual(acc["folder"], acc["dataloader"] - 0.1, out)
        self.assertGreaterEqual(acc["shards"], acc["dataloader"] - 0.1, out)


class DDPTest(unittest.TestCase):
    def test_a_ddp_trial_learns_as_from_distributed_sampler(self):
        """One trial of 2 DDP ranks (torch.distributed, gloo on CPU),
        trained from DistributedSampler over the ImageFolder and from one
        tsock mount whose ranks join as a group (scripts/python/
        ddp_accuracy.py): both finish (no rank hangs), every epoch of
        both is dealt exactly with equal steps on every rank, and tsock's
        validation accuracy is the sampler's within 0.1. A rank reading
        the whole epoch (the group's deal removed) fails the exactness
        check; one with a batch more hangs DDP and fails the timeout."""
        out, runs = _ddp_accuracy(self, (400, 120, 8, 48, 96), "--world", "2", "--seeds", "1", "--epochs", "3",
                                  "--image-size", "32", "--batch-size", "16")
        self.assertTrue(runs["tsock"]["exact"] and runs["sampler"]["exact"], out.stdout)
        self.assertEqual(runs["tsock"]["steps"], runs["sampler"]["steps"], out.stdout)  # ceil(200/16) a rank an epoch
        self.assertGreater(runs["sampler"]["accuracy"], 0.4, out.stdout)  # it learns at all
        self.assertGreaterEqual(runs["tsock"]["accuracy"], runs["sampler"]["accuracy"] - 0.1, out.stdout)

    def test_ranks_refuse_mounts_that_cannot_serve_one_trial(self):
        """Before a rank joins, the ranks of a DDP job compare their mounts
        (torch.distributed's all_gather): nodes that disagree on the
        source or seed (fingerprints), on the node count, a world the
        nodes cannot split, and a rank on another node's mount are
        refused on every rank alike, naming what and where."""
        from tsock import ranks
        ok = [(0, 2, "ab"), (0, 2, "ab"), (1, 2, "ab"), (1, 2, "ab")]
        ranks.check_nodes(2, 4, ok[2], ok)  # agrees: no error
        ranks.check_nodes(1, 2, (0, 1, ""), [(0, 1, ""), (0, 1, "")])  # one node
        for gathered, world, says in (
                ([(0, 2, "ab"), (0, 2, "ab"), (1, 2, "cd"), (1, 2, "cd")], 4, "disagree on the source"),
                ([(0, 2, "ab"), (0, 2, "ab"), (1, 3, "ab"), (1, 2, "ab")], 4, "rank 2: 3"),
                ([(0, 2, "ab"), (0, 2, "ab"), (1, 2, "ab")], 3, "a multiple of 2"),
                ([(0, 2, "ab"), (1, 2, "ab"), (0, 2, "ab"), (1, 2, "ab")], 4, "rank 1 on node 1 (node 0 serves it)")):
            with self.assertRaises(tsock.TsockError) as e:
                ranks.check_nodes(0, world, gathered[0], gathered)
            self.assertIn(says, str(e.exception))

    def test_two_nodes_serve_one_four_rank_trial(self):
        """Two tsock daemons as two nodes (--node 0/2 and 1/2, each its
        own mount) serve one DDP trial of 4 ranks (gloo), 2 on each: it
        finishes, every epoch every sample reaches a rank (fewer than 4
        twice, the padding), every rank takes the same steps (those of
        DistributedSampler over the same data), and it learns."""
        out, runs = _ddp_accuracy(self, (203, 80, 4, 32, 64), "--world", "4", "--nodes", "2", "--sides", "tsock",
                                  "--seeds", "1", "--epochs", "2", "--image-size", "16", "--batch-size", "8")
        run = runs["tsock"]
        self.assertTrue(run["exact"], out.stdout)
        self.assertEqual((run["nodes"], run["world"]), (2, 4), out.stdout)
        self.assertEqual(run["steps"], [7, 7], out.stdout)  # ceil(ceil(203/4)/8): DistributedSampler's steps
        self.assertGreater(run["accuracy"], 0.3, out.stdout)  # 4 classes: it learns at all


def _ddp_accuracy(test, data, *args):
    """Runs scripts/python/ddp_accuracy.py ARGS over new folders of
    generated images (data: train and val images, classes, min and max
    side), asserting it exits 0: its output and each side's run."""
    train, val = tempfile.mkdtemp(prefix="tsock-ddp-"), tempfile.mkdtemp(prefix="tsock-ddp-")
    images, vals, classes, lo, hi = data
    for d, n in ((train, images), (val, vals)):
        subprocess.run([tsock_binary(), "gendata", d, "--images", str(n), "--classes", str(classes), "--min-side", str(lo),
                        "--max-side", str(hi)], check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([PY, os.path.join(ROOT, "scripts", "python", "ddp_accuracy.py"), "--train", train, "--val", val,
                          *args, "--timeout", "300", "--tsock", tsock_binary()], capture_output=True, text=True)
    test.assertEqual(out.returncode, 0, out.stdout + out.stderr)
    return out, {r["side"]: r for r in (json.loads(line) for line in out.stdout.splitlines() if line.startswith("{"))}


class MixTest(unittest.TestCase):
    def test_class_sorted_shards_mix_like_a_uniform_shuffle_through_the_mount(self):
        """Class-sorted tar shards (one class a shard, 8 classes) in a
        shard memory of 4.65 shards, read through a real mount by a
        consumer at the mount's batch size and by one at its own (48), two
        epochs each (the first one too): a batch holds at least 0.9 of the
        distinct labels a uniform shuffle's batch does, each label is in at
        least 0.9 of the epoch's tenths a uniform shuffle puts it in, and
        consecutive batches share no more of their labels than a uniform
        shuffle's do (at most 1.1 of it; scripts/python/mixstats.py). The
        shards' own order (--shard-disk 0 here: a window of 2 shards) gives
        0.32 of the distinct labels and 0.33 of the tenths, and fails it."""
        sys.path.insert(0, os.path.join(ROOT, "scripts", "python"))
        import mixstats

        train = folder(images=400, classes=8)
        shards, memory = _class_sorted_shards(train)
        m = Mount(self, "--source", shards, "--shard-memory", str(memory), "--batch-size", "32", "--epochs", "2",
                  "--image-size", "16")
        for batch_size in (None, 48):
            rows = mixstats.measure(m.dir, 2, batch_size)
            self.assertEqual(len(rows), 2)
            for r in rows:
                u = r["uniform"]
                self.assertGreaterEqual(r["distinct"], 0.9 * u["distinct"], r)
                self.assertGreaterEqual(r["even"], 0.9 * u["even"], r)
                self.assertLessEqual(r["shared"], 1.1 * u["shared"], r)
                self.assertEqual(r["batch_size"], batch_size or 32, r)


def _class_sorted_shards(folder):
    """Writes folder's images as tar shards, one class a shard in class
    order (as a conversion straight from a class-sorted folder does):
    returns their spec and 4.65 shards' worth of bytes."""
    import tarfile

    out = tempfile.mkdtemp(prefix="tsock-acc-shards-")
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    total = 0
    for label, cls in enumerate(classes):
        path = os.path.join(out, "shard-%03d.tar" % label)
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
            for name in sorted(os.listdir(os.path.join(folder, cls))):
                key = "%s-%s" % (cls, os.path.splitext(name)[0])
                tar.add(os.path.join(folder, cls, name), arcname=key + ".jpg")
                data = str(label).encode()
                info = tarfile.TarInfo(key + ".cls")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        total += os.path.getsize(path)
    spec = os.path.join(out, "shard-{000..%03d}.tar" % (len(classes) - 1))
    return spec, total * 465 // 100 // len(classes)


class _Tokens:
    """A map-style dataset of variable-length samples; sample 5 fails."""

    def __len__(self):
        return 23

    def __getitem__(self, i):
        if i == 5:
            raise ValueError("unreadable sample")
        return {"tok": np.full(i % 4, i, np.int32), "y": i}


class _Numbers:
    """Sample i is {"x": i}; made, if given, lists every index made."""

    def __init__(self, n, made=None):
        self.n = n
        self.made = made

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.made is not None:
            self.made.append(int(i))
        return {"x": np.int64(i)}


class _Failing(_Numbers):
    def __getitem__(self, i):
        raise OSError("unreadable")


def _collate_tokens(items):
    import torch

    return {"tok": [x["tok"] for x in items], "y": torch.tensor([x["y"] for x in items]),
            "w": torch.full((len(items), 2), 0.5, dtype=torch.bfloat16)}


class PackageTest(unittest.TestCase):
    """The client as pip installs it, and python3 -m tsock status."""

    def test_is_the_installed_package(self):
        if os.environ.get("TSOCK_FROM_SOURCE") != "1":
            src = os.path.join(ROOT, "scripts", "python")
            self.assertFalse(os.path.abspath(tsock.__file__).startswith(src + os.sep),
                             f"tsock imported from the source tree ({tsock.__file__}), not the installed package")
        for name in ("py.typed", "VERSION", "__main__.py", "batchfile.py", "consumer.py", "control.py", "cuda.py",
                     "errors.py", "ingest.py", "loader.py", "status.py"):
            self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(tsock.__file__), name)), name)

    def test_version_is_the_binarys(self):
        """One version for the binary and the client: cmd/tsock/VERSION."""
        with open(os.path.join(ROOT, "cmd", "tsock", "VERSION")) as f:
            want = f.read().strip()
        self.assertEqual(tsock.__version__, want)
        out = subprocess.run([tsock_binary(), "version"], capture_output=True, text=True, check=True).stdout
        first = out.splitlines()[0].split(":", 1)
        self.assertEqual(first[0], "tsock", out)
        self.assertTrue(first[1].strip().startswith(want), out)

    def run_status(self, *args):
        return subprocess.run([PY, "-m", "tsock", "status", *args], capture_output=True, text=True, timeout=60)

    def test_status_of_a_live_mount(self):
        m = Mount(self, "--source", "synthetic:48", "--batch-size", "8", "--image-size", "16", "--epochs", "1")
        c = tsock.Consumer(m.dir, name="reader")
        self.addCleanup(c.close)
        n = sum(1 for _ in c)
        # The last batch is consumed at its RELEASE, which the kernel sends
        # after the close, asynchronously: poll for it (bounded).
        deadline = time.monotonic() + 20
        while (mine := c.status())["state"] != "done" and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(n, 6)
        self.assertEqual((mine["state"], mine["samples_read"], mine["epoch_done"], mine["epoch_len"]), ("done", 48, 48, 48))
        out = self.run_status(m.dir, "--json")
        self.assertEqual(out.returncode, 0, out.stderr)
        doc = json.loads(out.stdout)
        self.assertEqual((doc["version"], doc["mode"], doc["producer"]["unit"], doc["producer"]["samples"]), (1, "pipeline", "images", 48))
        out = self.run_status(m.dir)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertTrue(lines[0].startswith(f"tsock {m.dir}: "), lines[0])
        self.assertTrue(all(len(line) <= 80 for line in lines), out.stdout)
        row = next(line.split() for line in lines if line.startswith("reader "))
        self.assertEqual((row[1], row[2], row[4]), ("done", "1/1", "100%"), out.stdout)

    def test_status_errors_are_one_line(self):
        for path, says in ((tempfile.gettempdir(), "is not a tsock mount"), ("/no/such/dir", "no such file or directory")):
            out = self.run_status(path)
            self.assertEqual(out.returncode, 1, out.stderr)
            self.assertEqual(out.stderr.count("\n"), 1, out.stderr)
            self.assertIn(says, out.stderr)
        self.assertEqual(self.run_status().returncode, 2, "no mountpoint: usage")


class IngestTest(unittest.TestCase):
    """Any pipeline shares through tsock (tsock mount --ingest)."""

    def test_ingest_mount_has_no_classes(self):
        m = Mount(self, "--ingest", "--samples", "8", "--batch-size", "4")
        self.assertIsNone(tsock.read_classes(m.dir))
        self.assertEqual(tsock.status.read(m.dir)["classes"], -1)

    def test_serve_gives_exact_epochs_with_structure_and_own_sizes(self):
        import threading

        m = Mount(self, "--ingest", "--samples", "23", "--batch-size", "4", "--epochs", "2", "--buffer", "1MiB")
        consumers = [tsock.Consumer(m.dir, batch_size=b) for b in (4, 3)]
        server = threading.Thread(target=tsock.serve, args=(m.dir, _Tokens()),
                                  kwargs={"batch_size": 4, "epochs": 2, "collate_fn": _collate_tokens})
        server.start()
        for c in consumers:
            epochs = 0
            for epoch in c.epochs():
                seen = []
                for b in epoch:
                    self.assertEqual(sorted(b), ["tok", "w", "y"])  # the published dict, without tsock's indices
                    self.assertIsInstance(b["tok"], tsock.Ragged)
                    for i, y in enumerate(b["y"]):
                        self.assertTrue((b["tok"][i] == y).all() and len(b["tok"][i]) == y % 4)
                    seen += list(b["y"])
                self.assertEqual(sorted(seen), [i for i in range(23) if i != 5])
                epochs += 1
            self.assertEqual(epochs, 2)
            c.close()
        server.join(30)
        self.assertFalse(server.is_alive())
        with open(m.path("ingest", "status")) as f:
            self.assertIn("skipped samples: 1", f.read())

    def test_serve_to_subsets_makes_only_what_they_want(self):
        """ingest/order hands out only what the consumers' subsets want:
        serve, unchanged, makes two lists' samples and no other, and each
        consumer gets exact epochs of its own list."""
        import threading

        m = Mount(self, "--ingest", "--samples", "40", "--batch-size", "4", "--epochs", "2", "--buffer", "1MiB")
        want = {"a": list(range(0, 12)), "b": list(range(8, 16))}
        consumers = {k: tsock.Consumer(m.dir, subset=v) for k, v in want.items()}
        made = []
        server = threading.Thread(target=tsock.serve, args=(m.dir, _Numbers(40, made)), kwargs={"batch_size": 4, "epochs": 2})
        server.start()
        for k, c in consumers.items():
            epochs = [sorted(int(x) for b in e for x in b["x"]) for e in c.epochs()]
            self.assertEqual(epochs, [want[k]] * 2, k)
            c.close()
        server.join(30)
        self.assertFalse(server.is_alive())
        self.assertEqual(sorted(set(made)), list(range(0, 16)), "samples no subset wants were made")
        self.assertEqual(len(made), 2 * 16, "a sample two subsets share was made twice in an epoch")

    def test_serve_grows_with_ingest_samples(self):
        """Writing a larger size to ingest/samples grows an ordered ingest:
        the new indices join from a later producer epoch, every epoch is
        the data as it was (old or grown), and serve, unchanged, makes
        them; a smaller size or junk is EINVAL and changes nothing."""
        import errno
        import threading

        # Room for two batches (4160 bytes each), the one the consumer
        # holds and the next: epoch 0's last cannot be written, nor epoch
        # 1's order asked for, before the consumer has grown the data in
        # the middle of epoch 0, however fast the daemon is. With room
        # for every batch (1 MiB), a daemon built without the race
        # detector had made all three epochs by then. One batch's room
        # is a wait that could never end (the client holds a batch while
        # it opens the next): refused, as it should be.
        m = Mount(self, "--ingest", "--samples", "12", "--batch-size", "4", "--epochs", "3", "--buffer", "12KiB")
        knob = m.path("ingest", "samples")
        for bad in ("8\n", "many\n"):
            with self.assertRaises(OSError) as e:
                with open(knob, "w") as f:
                    f.write(bad)
            self.assertEqual(e.exception.errno, errno.EINVAL)
        with open(knob) as f:
            self.assertEqual(f.read(), "12\n")
        c = tsock.Consumer(m.dir)
        server = threading.Thread(target=tsock.serve, args=(m.dir, _Numbers(20)), kwargs={"batch_size": 4, "epochs": 3})
        server.start()
        epochs = []
        for e in c.epochs():
            seen = []
            for b in e:
                seen += [int(x) for x in b["x"]]
                if len(epochs) == 0 and len(seen) == 4:
                    with open(knob, "w") as f:
                        f.write("20\n")
            epochs.append(sorted(seen))
        c.close()
        server.join(30)
        self.assertFalse(server.is_alive())
        grown = [i for i, e in enumerate(epochs) if e == list(range(20))]
        self.assertTrue(grown and grown[0] >= 1 and all(e == list(range(12)) for e in epochs[:grown[0]]), epochs)
        self.assertEqual(grown, list(range(grown[0], len(epochs))), epochs)
        with open(m.path("ingest", "status")) as f:
            self.assertIn("samples: 20 (8 added through ingest/samples", f.read())

    def test_serve_with_subprocesses_mid_write_gives_exact_epochs(self):
        """A thread spawning subprocesses while serve writes (each child
        closes its copies of the batch file being written) changes no
        batch: every epoch is whole."""
        import threading

        m = Mount(self, "--ingest", "--samples", "3000", "--batch-size", "64", "--epochs", "2", "--buffer", "4MiB")
        stop = threading.Event()

        def spawn():
            while not stop.is_set():
                subprocess.run(["true"])

        spawner = threading.Thread(target=spawn)
        spawner.start()
        self.addCleanup(spawner.join)
        self.addCleanup(stop.set)
        server = threading.Thread(target=tsock.serve, args=(m.dir, _Numbers(3000)), kwargs={"batch_size": 64, "epochs": 2})
        server.start()
        m.watchdog(120)
        with tsock.Consumer(m.dir) as c:
            for epoch in c.epochs():
                seen = sorted(int(v) for b in epoch for v in b["x"])
                self.assertEqual(seen, list(range(3000)))
        server.join(60)
        self.assertFalse(server.is_alive())
        with open(m.path("ingest", "status")) as f:
            st = f.read()
        self.assertIn("refused: 0\n", st)
        self.assertIn("skipped samples: 0\n", st)

    def test_serve_of_samples_that_all_fail_raises(self):
        """Every __getitem__ raises: serve raises, and so does a consumer,
        both naming the skips; neither waits forever."""
        import threading

        for epochs in ("1", "2"):
            m = Mount(self, "--ingest", "--samples", "20", "--batch-size", "4", "--epochs", epochs, "--max-skipped", "100%")
            m.exit_code = 1
            c = tsock.Consumer(m.dir)
            errors = []

            def run():
                try:
                    tsock.serve(m.dir, _Failing(20), batch_size=4)
                except tsock.TsockError as e:
                    errors.append(e)

            server = threading.Thread(target=run)
            server.start()
            m.watchdog(60)
            with self.assertRaisesRegex(tsock.TsockError, "every sample of the dataset was skipped"):
                list(c)
            c.close()
            server.join(60)
            self.assertFalse(server.is_alive(), "serve still running")
            self.assertEqual(len(errors), 1, "serve returned as if it had succeeded")
            self.assertIn("every sample of the dataset was skipped", str(errors[0]))

    def test_serve_iterable_keeps_tuples_and_bfloat16(self):
        import torch

        m = Mount(self, "--ingest", "--batch-size", "2", "--buffer", "1MiB")
        batches = [(torch.arange(2 * k, 2 * k + 2), torch.full((2, 3), k, dtype=torch.bfloat16)) for k in range(3)]
        c = tsock.Consumer(m.dir)
        tsock.serve_iterable(m.dir, batches, epochs=1)
        got = list(c)
        self.assertEqual(len(got), 3)
        self.assertIsInstance(got[0], tuple)
        self.assertEqual([int(v) for b in got for v in b[0]], list(range(6)))
        loader = tsock.torch_loader(m.dir, batch_size=3)
        tsock.serve_iterable(m.dir, batches, epochs=1)
        for ids, w in loader:
            self.assertEqual(w.dtype, torch.bfloat16)
            self.assertTrue((w.float() == (ids // 2).float().unsqueeze(1)).all())
        loader.close()
        c.close()

    def test_ragged_bfloat16_stays_bfloat16(self):
        """A ragged list of bfloat16 tensors is published as BF16 (it was
        I16: its 16-bit integer view), read back as bfloat16; a ragged list
        of several dtypes is refused with its name."""
        import torch

        from tsock.batchfile import flatten

        w = [torch.tensor([1.5, 2.5], dtype=torch.bfloat16), torch.tensor([3.0], dtype=torch.bfloat16)]
        tensors, _ = flatten({"w": w})
        self.assertEqual([(n, d) for n, _, d in tensors], [("w", "BF16"), ("w.offsets", "I64")])
        with self.assertRaisesRegex(tsock.TsockError, "w: a ragged list of arrays of several dtypes"):
            flatten({"w": [w[0], torch.tensor([1], dtype=torch.int16)]})
        m = Mount(self, "--ingest", "--batch-size", "2", "--buffer", "1MiB")
        loader = tsock.torch_loader(m.dir, batch_size=2)
        tsock.serve_iterable(m.dir, [{"w": w}], epochs=1)
        (got,) = list(loader)
        self.assertEqual(got["w"].values.dtype, torch.bfloat16)
        self.assertEqual(got["w"].values.float().tolist(), [1.5, 2.5, 3.0])
        loader.close()

    def test_serve_iterable_without_an_end(self):
        """epochs=None, which the signature allows, serves epoch after epoch
        until the mount stops (it raised TypeError)."""
        import tsock.ingest as ingest

        published = []

        class Stops:  # a mount that stops after 7 batches
            def __init__(self, mount):
                pass

            def publish(self, batch, epoch=0, last=False):
                if len(published) == 7:
                    raise tsock.MountClosed("the mount stopped")
                published.append(epoch)

        real, ingest.Producer = ingest.Producer, Stops
        try:
            tsock.serve_iterable("/nowhere", [{"x": np.zeros(2)}, {"x": np.ones(2)}], epochs=None)
        finally:
            ingest.Producer = real
        self.assertEqual(published, [0, 0, 1, 1, 2, 2, 3])

    def test_torch_loader_leaves_the_warning_filters(self):
        """A torch loader reads the mapped, read-only batches without torch's
        warning, and leaves the process's warning filters as they were."""
        import warnings

        import torch

        from tsock.loader import TorchLoader

        class Stub:
            name = "stub"

            def epochs(self):
                return iter(())

        before = list(warnings.filters)
        loader = TorchLoader(Stub(), "cpu", None, None, torch.float32)
        a = np.frombuffer(bytes(8), np.uint8)  # read-only, as a mapped batch
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            loader._tensor(a)
        self.assertEqual(list(warnings.filters), before)
        self.assertEqual([str(w.message) for w in seen], [])

    def test_serve_ends_when_the_mount_is_unmounted(self):
        """serve returns when the mount stops, as documented: an ENOENT of
        ingest/ under a mount that is gone is the mount closing, not an
        error (it raised TsockError "ingest/status unreadable")."""
        import threading

        m = Mount(self, "--ingest", "--samples", "8", "--batch-size", "4", "--epochs", "0")
        m.watchdog(60)  # a hang fails the test instead
        c = tsock.Consumer(m.dir)
        outcome = []

        def run():
            try:
                tsock.serve(m.dir, [{"x": np.float32(i)} for i in range(8)], batch_size=4)
                outcome.append("returned")
            except Exception as e:  # the test reports it
                outcome.append(repr(e))

        t = threading.Thread(target=run)
        t.start()
        next(iter(c))  # serving
        c.close()
        m.proc.send_signal(signal.SIGTERM)
        m.proc.wait(30)
        t.join(30)
        self.assertEqual(outcome, ["returned"])
        # Whichever call meets the mount gone (ESHUTDOWN while it stops,
        # ENOENT once it is unmounted), it is the mount closing.
        m2 = Mount(self, "--ingest", "--samples", "8", "--batch-size", "4")
        p = tsock.Producer(m2.dir)
        m2.proc.send_signal(signal.SIGTERM)
        m2.proc.wait(30)
        for call in (p.order, p.next, lambda: p.publish({"x": np.zeros(4, np.float32)}, indices=[0, 1, 2, 3])):
            with self.assertRaises(tsock.MountClosed):
                call()

    def test_a_consumer_gives_up_after_its_timeout(self):
        """A consumer whose producer died waits no longer than its timeout,
        and says what the mount says: nothing written since a time."""
        m = Mount(self, "--ingest", "--samples", "20", "--batch-size", "4")
        with tsock.Consumer(m.dir, timeout=0.5) as c:
            with self.assertRaisesRegex(tsock.TsockError, r"no batch in 0.5 s \(the mount: .*nothing since the mount"):
                next(iter(c))
        self.assertRegex(m.status(), r"state: waiting for a producer to write ingest/000000.safetensors: nothing since the mount at")

    def test_bad_batches_raise_with_the_reason(self):
        m = Mount(self, "--ingest", "--buffer", "1MiB")
        p = tsock.Producer(m.dir)
        p.publish({"x": np.zeros((2, 3), np.float32)})
        with self.assertRaisesRegex(tsock.TsockError, "first batch"):
            p.publish({"x": np.zeros((2, 4), np.float32)})
        self.assertEqual(p.next(), 1)


class ExamplesTest(unittest.TestCase):
    """The bring-your-own-pipeline examples run whole and check themselves."""

    def run_example(self, script, *args):
        out = subprocess.run([PY, os.path.join(ROOT, "scripts", "examples", script), *args, "--tsock", tsock_binary()],
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout.splitlines()[-1])

    def test_kfold_example(self):
        """scripts/examples/kfold.py: five folds' trials at once on a
        training and an eval mount; each trains on 4/5 and validates on
        its fifth, and the producers decode each image once per epoch."""
        r = self.run_example("kfold.py", "--images", "100", "--folds", "5", "--epochs", "2")
        self.assertEqual(sorted(f["fold"] for f in r["folds"]), [1, 2, 3, 4, 5])
        for f in r["folds"]:
            self.assertEqual((f["trained"], f["validated"]), (2 * 80, 20), f)
            self.assertTrue(0 <= f["accuracy"] <= 1, f)
        self.assertEqual(r["decoded"], {"train": 2 * 100, "eval": 100})
        self.assertEqual(r["dataloaders_would_decode"], {"train": 5 * 2 * 80, "eval": 100})

    def test_optuna_sweep_example(self):
        """scripts/examples/optuna_sweep.py: an Optuna study with pruning
        and validation after every epoch, 4 trials in 2 processes on a
        training and an eval mount; the eval mount decodes its set once
        for every trial's every pass (--keep)."""
        r = self.run_example("optuna_sweep.py", "--images", "100", "--trials", "4", "--workers", "2", "--epochs", "2")
        self.assertEqual(r["completed"] + r["pruned"], 4, r)
        self.assertTrue(0 <= r["best"] <= 1, r)
        self.assertEqual(r["decoded"]["eval"], 100, r)
        self.assertLessEqual(r["decoded"]["train"], 4 * 2 * 100, r)
        self.assertGreater(r["trained"], 0, r)

    def test_serve_torchvision_to_four_trials(self):
        r = self.run_example("serve_torchvision.py", "sweep", folder(), "--image-size", "32", "--batch-size", "8",
                             "--classes", "4")
        self.assertTrue(r["exact_epochs"])
        self.assertEqual(len(r["trials"]), 4)
        for t in r["trials"]:
            self.assertEqual([e["distinct"] for e in t["epochs"]], [45, 45], t)
            self.assertEqual(t["steps"], 2 * 6)  # 45 images in batches of 8, twice

    def test_serve_text_ragged_in_own_batch_sizes(self):
        r = self.run_example("serve_text.py", "demo", "--sizes", "32,7,100")
        self.assertTrue(r["exact"])
        self.assertEqual([c["batch_size"] for c in r["consumers"]], [32, 7, 100])
        for c in r["consumers"]:
            self.assertEqual(c["wrong"], 0)
            self.assertEqual(max(c["sizes"]), c["batch_size"])
            self.assertEqual([e["tokens"] for e in c["epochs"]], [r["tokens"]] * 2)


class RealPhotosTest(unittest.TestCase):
    """tsock's pixels against torchvision's on real photographs (cut from
    Debian's wallpaper photos by scripts/realphotos.sh, CMYK, grayscale and
    progressive files among them)."""

    @classmethod
    def setUpClass(cls):
        cls.photos = tempfile.mkdtemp(prefix="tsock-photos-")
        out = subprocess.run([os.path.join(ROOT, "scripts", "realphotos.sh"), cls.photos, "120", "--seed", "3"],
                             capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"scripts/realphotos.sh failed: {out.stderr}")
        cls.summary = out.stdout.strip()

    def test_eval_matches_torchvision(self):
        """Resize(256) + CenterCrop(224) as torchvision does it: per image
        mean |diff| at most 2.0 at p99, with no spatial shift; every file
        read (CMYK too)."""
        import importlib.util  # the comparison is a script of scripts/python, not of the package
        spec = importlib.util.spec_from_file_location("compare_eval", os.path.join(ROOT, "scripts", "python", "compare_eval.py"))
        compare_eval = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(compare_eval)
        m = Mount(self, "--source", self.photos, "--transform", "eval", "--image-size", "224", "--epochs", "1",
                  "--batch-size", "30", "--buffer", "256MiB")
        r = compare_eval.compare(m.dir, self.photos, 224)
        print(f"\n{self.summary}\neval vs torchvision: {json.dumps(r)}", file=sys.stderr)
        self.assertEqual(r["images"], 120, m.status())
        self.assertLessEqual(r["mean_abs_diff_p99"], 2.0, r)
        self.assertEqual(r["best_matched_shifted"], 0, r)


class GPUTest(unittest.TestCase):
    """GPU mode without a GPU: the daemon runs on the fake libcuda.so (its
    IPC handles carry the "device" address), the client on a fake opener."""

    @classmethod
    def setUpClass(cls):
        cls.data = folder()
        d = tempfile.mkdtemp(prefix="tsock-fakecuda-")
        cls.lib = os.path.join(d, "libcuda.so.1")
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", cls.lib, os.path.join(ROOT, "gpu", "gputest", "testdata", "fakecuda.c")],
                       check=True)

    def test_cuda_batches(self):
        os.environ["TSOCK_LIBCUDA"] = self.lib
        self.addCleanup(os.environ.pop, "TSOCK_LIBCUDA")
        m = Mount(self, "--source", self.data, "--image-size", "32", "--batch-size", "8", "--epochs", "1",
                  "--buffer", "1MiB", "--device", "cuda:0")
        with open(m.path("gpu", "slabs")) as f:
            slab_at = {}
            for line in f:
                sid, handle, size, uuid, offset = line.split()
                slab_at[int(sid)] = int.from_bytes(bytes.fromhex(handle)[8:16], "little") + int(offset)
        opened, joined = [], []

        def open_handle(handle):
            opened.append(handle)
            return int.from_bytes(handle[8:16], "little")

        def concat(parts, shape, typestr):
            joined.append((len(parts), tuple(shape), typestr))
            return ("on the device", tuple(shape))

        def cuda_files_open():
            fds = os.listdir("/proc/self/fd")
            return sum(1 for fd in fds if os.path.exists(f"/proc/self/fd/{fd}") and os.readlink(f"/proc/self/fd/{fd}").endswith(".cuda"))

        held_at_sync = []  # .cuda files still open each time a release synchronizes

        def synchronize():
            held_at_sync.append(cuda_files_open())

        tsock.cuda._handles.clear()
        samples = 0
        with tsock.cuda_batches(m.dir, open_handle=open_handle, concat=concat, synchronize=synchronize) as c:
            for b in c:
                n = b["labels"].shape[0]
                img, lab = b["images"].__cuda_array_interface__, b["labels"].__cuda_array_interface__
                self.assertEqual((img["shape"], img["typestr"], img["version"]), ((n, 3, 32, 32), "|u1", 3))
                self.assertEqual((lab["shape"], lab["typestr"]), ((n,), "<i8"))
                # A producer batch: labels at the slab's start, images after labels and indices.
                self.assertIn(lab["data"][0], slab_at.values())
                self.assertEqual(img["data"][0], lab["data"][0] + 16 * n)
                # Held while its tensors live (the previous one's release may
                # still be on its way: the kernel sends it after close).
                self.assertNotEqual(c.status()["open_batches"], 0, "the batch is not held while its tensors live")
                samples += n
                del b, img, lab
        self.assertEqual(samples, 45)
        self.assertEqual(len(opened), 1, "the slabs' one handle was opened more than once")
        # Every release waited for the GPU while its batch was still held:
        # queued kernels may read it until then (seen on an H100).
        self.assertEqual(len(held_at_sync), 6, "a batch was released without waiting for the GPU")
        self.assertNotIn(0, held_at_sync, "a batch was released before waiting for the GPU")
        self.assertEqual(cuda_files_open(), 0)
        # A batch size that cuts producer batches: tensors span slabs.
        with tsock.cuda_batches(m.dir, batch_size=5, open_handle=open_handle, concat=concat, synchronize=lambda: None) as c:
            batches = [dict(b) for b in c]
        rows = [x[1][0] if isinstance(x, tuple) else x.shape[0] for x in (b["labels"] for b in batches)]  # joined or not
        self.assertEqual(sum(rows), 45)
        self.assertIn((2, (5, 3, 32, 32), "|u1"), joined)
        self.assertEqual(len(opened), len(set(opened)))

    def test_torch_takes_the_arrays(self):
        """torch.as_tensor refuses a __cuda_array_interface__ flagged
        read-only (TypeError; seen with torch 2.11 on an H100): tsock's
        arrays must get past that check. Without CUDA, torch then fails
        only where it would touch the device."""
        import torch

        a = tsock.CudaArray(1 << 20, (2, 3), "|u1", None)
        try:
            torch.as_tensor(a, device="cuda")
        except TypeError as e:
            self.fail(f"torch refuses tsock's CUDA arrays: {e}")
        except (RuntimeError, AssertionError):
            pass  # no CUDA here: past the interface's checks

    def test_no_gpu_mode_is_a_clear_error(self):
        m = Mount(self, "--source", self.data, "--image-size", "32", "--batch-size", "8")
        with self.assertRaisesRegex(tsock.TsockError, "--device"):
            tsock.cuda_batches(m.dir, open_handle=lambda h: 0)


if __name__ == "__main__":
    unittest.main()
