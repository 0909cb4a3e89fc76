"""The batch format, with no mount: what write_batch lays out, load_batch
reads back; what is not a tsock batch is refused with the reason.

    cd scripts/python/tests && python3 -m unittest -v test_format
"""
import json
import os
import struct
import tempfile
import unittest

import numpy as np

import tsock
from tsock.batchfile import PAGE, STRUCTURE, flatten, write_batch


class FormatTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tsock-format-")

    def path(self, name="b.safetensors"):
        return os.path.join(self.dir, name)

    def write(self, batch, meta=None):
        tensors, kind = flatten(batch)
        m = dict(meta or {})
        m[STRUCTURE] = json.dumps(kind)
        path = tempfile.mktemp(suffix=".safetensors", dir=self.dir)  # write_batch makes a new file, never overwrites
        write_batch(path, tensors, m)
        return path

    def test_round_trip_dict_tuple_ragged(self):
        x = np.arange(24, dtype=np.float32).reshape(4, 6)
        y = np.array([3, 1, 4, 1], np.int64)
        b = tsock.load_batch(self.write({"x": x, "y": y}, {"epoch": "2", "batch": "7"}))
        np.testing.assert_array_equal(b["x"], x)
        np.testing.assert_array_equal(b["y"], y)
        self.assertEqual((b.epoch, b.index), (2, 7))
        self.assertEqual(list(b.value), ["x", "y"])
        t = tsock.load_batch(self.write((x, y))).value
        self.assertIsInstance(t, tuple)
        np.testing.assert_array_equal(t[1], y)
        rows = [np.arange(n, dtype=np.int32) for n in (3, 0, 5)]
        r = tsock.load_batch(self.write({"tok": rows}))["tok"]
        self.assertIsInstance(r, tsock.Ragged)
        self.assertEqual([list(v) for v in r], [list(v) for v in rows])

    def test_data_starts_on_a_page(self):
        path = self.write({"x": np.zeros(3, np.uint8)})
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
        self.assertEqual((8 + n) % PAGE, 0)

    def test_arrays_are_read_only_views_unless_writable(self):
        path = self.write({"x": np.ones(4, np.uint8)})
        with self.assertRaises(ValueError):
            tsock.load_batch(path)["x"][0] = 9
        w = tsock.load_batch(path, writable=True)
        w["x"][0] = 9
        self.assertEqual(tsock.load_batch(path)["x"][0], 1, "a writable batch wrote through to the file")

    def test_what_is_not_a_batch_is_refused(self):
        good_js = json.dumps({"x": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}).encode()
        cases = {
            "short": b"\x01\x02",
            "header longer than the file": struct.pack("<Q", 1 << 40) + b"{}",
            "not JSON": struct.pack("<Q", 4) + b"{{{{",
            "not an object": struct.pack("<Q", 2) + b"[]",
            "no tensors": struct.pack("<Q", 2) + b"{}",
            "unknown dtype": struct.pack("<Q", len(good_js)) + good_js.replace(b"U8", b"Q9") + b"xx",
            "data past the end": struct.pack("<Q", len(good_js)) + good_js + b"x",
        }
        for name, data in cases.items():
            with self.subTest(name):
                with open(self.path(), "wb") as f:
                    f.write(data)
                with self.assertRaises(tsock.TsockError) as e:
                    tsock.load_batch(self.path())
                self.assertIn("b.safetensors", str(e.exception))

    def test_unpublishable_values_are_refused(self):
        with self.assertRaises(tsock.TsockError):
            flatten(np.zeros(3))  # neither a dict nor a tuple
        with self.assertRaises(tsock.TsockError):
            flatten({"s": np.array(["a"])})  # no safetensors dtype


if __name__ == "__main__":
    unittest.main()
