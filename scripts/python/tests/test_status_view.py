"""The status view, with no mount: tsock.status.render of a status.json
document, as `tsock status` draws it (cmd/tsock's TestPythonDrawsWhatGoDraws
compares the two on live mounts).

    cd scripts/python/tests && python3 -m unittest -v test_status_view
"""
import glob
import json
import os
import tempfile
import time
import unittest

from tsock import starting, status

DOC = {
    "version": 1, "mode": "pipeline", "source": "/data/\x1b[2Jtrain", "classes": 10, "state": "full",
    "state_text": "buffer full, waiting for consumers to read", "uptime_seconds": 8,
    "producer": {"unit": "images", "batch_size": 64, "epoch": 1, "epochs": 3, "epoch_done": 1546, "epoch_len": 2000,
                 "batches": 30, "samples": 3546, "rate": 192, "rate_overall": 192, "rate_history": [1277, 40, 3],
                 "waited_seconds": 1},
    "buffer": {"limit": 256 << 20, "used": 221 << 20, "reserved": 0, "mapped_after_release": 0, "batches": 6},
    "data_path": "passthrough from tmpfs huge=advise", "skipped": 0,
    "consumers": [
        {"name": "trial-1", "state": "waiting", "subset": "fold 1/5", "subset_size": 1600, "epoch": 1, "epochs": 3,
         "epoch_done": 1024, "epoch_len": 1600, "batch_size": 64, "position": 40, "lag_batches": 2, "lag_bytes": 1,
         "batches_read": 40, "samples_read": 2560, "bytes_read": 1, "open_batches": 0, "waited_seconds": 7.8,
         "wait_share": 0.97, "age_seconds": 8},
    ],
}


class StatusViewTest(unittest.TestCase):
    def test_render_says_what_the_document_says_in_80_columns(self):
        out = status.render(json.loads(json.dumps(DOC)), "/mnt/x", now=0)
        for want in ("/mnt/x", "full", "1546/2000", "221 MiB of 256 MiB", "trial-1", "fold 1/5", "97%"):
            self.assertIn(want, out)
        for line in out.splitlines():
            self.assertLessEqual(len(line), status.WIDTH, line)
        self.assertNotIn("\x1b", out, "a control character reached the terminal")

    def test_any_numbers_render(self):
        doc = json.loads(json.dumps(DOC))
        doc["producer"].update(rate_history=[], epoch_len=0, rate=1e300)
        doc["consumers"][0].update(lag_batches=2 ** 64 - 1, epoch_len=0, wait_share=7)
        doc["buffer"].update(limit=0, mapped_after_release=-1)
        for line in status.render(doc, "/mnt/x", now=0).splitlines():
            self.assertLessEqual(len(line), status.WIDTH, line)

    def test_read_refuses_what_is_not_a_mount(self):
        d = tempfile.mkdtemp(prefix="tsock-status-")
        open(os.path.join(d, "notes"), "w").close()
        with self.assertRaises(status.StatusError) as e:
            status.read(d, start_timeout=0)
        self.assertIn("not a tsock mount", str(e.exception))
        with open(os.path.join(d, "status.json"), "w") as f:
            json.dump({"version": 99}, f)
        with self.assertRaises(status.StatusError) as e:
            status.read(d)
        self.assertIn("version 99", str(e.exception))
        # An empty directory is waited for a moment (a mount may be
        # about to come), then refused in one line.
        empty = tempfile.mkdtemp(prefix="tsock-status-")
        said = []
        with self.assertRaises(status.StatusError) as e:
            starting.wait(empty, grace=0.2, say=said.append, error=status.StatusError)
        self.assertIn("an empty directory, nothing mounted there", str(e.exception))
        self.assertEqual(len(said), 1, said)


#: The documents every reader of a mount's status reads (their README).
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "status")


class StatusFixturesTest(unittest.TestCase):
    """The fixtures `tsock status` is held to (cmd/tsock's
    TestStatusFixtures): the same views of the same documents, the same
    error for each mountpoint that serves no status."""

    def setUp(self):
        self.tz = os.environ.get("TZ")
        os.environ["TZ"] = "UTC"
        time.tzset()

    def tearDown(self):
        if self.tz is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = self.tz
        time.tzset()

    def test_each_document_draws_its_view(self):
        docs = [p for p in sorted(glob.glob(os.path.join(FIXTURES, "*.json"))) if not p.endswith("reads.json")]
        self.assertGreaterEqual(len(docs), 3)
        for path in docs:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            with open(path[: -len(".json")] + ".view", encoding="utf-8") as f:
                want = f.read()
            self.assertEqual(status.render(doc, "/mnt/tsock", now=0), want, path)

    def test_each_mountpoint_without_status_says_why(self):
        with open(os.path.join(FIXTURES, "reads.json"), encoding="utf-8") as f:
            reads = json.load(f)
        for r in reads:
            mount = os.path.join(tempfile.mkdtemp(prefix="tsock-status-"), "mnt")
            if not r.get("missing"):
                os.mkdir(mount)
                for name, text in (r.get("files") or {}).items():
                    with open(os.path.join(mount, name), "w", encoding="utf-8") as f:
                        f.write(text)
            with self.assertRaises(status.StatusError, msg=r["name"]) as e:
                status.read(mount, start_timeout=0)
            self.assertEqual(str(e.exception), r["error"].replace("{mount}", mount), r["name"])


if __name__ == "__main__":
    unittest.main()
