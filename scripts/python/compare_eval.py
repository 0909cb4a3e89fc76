"""Compares tsock's eval transform with torchvision's on the same files.

    compare_eval.py MOUNT FOLDER SIZE [--json]

MOUNT serves FOLDER with --transform eval --image-size SIZE --layout nchw.
The reference is what a torchvision validation loader gives:
PIL's convert("RGB"), then Resize(round(SIZE / 0.875)) and
CenterCrop(SIZE). For every image it takes the mean absolute difference
over all pixels and channels, the PSNR, and the shift (dx, dy in -2..2)
of the reference that minimizes the difference, counted where it beats
no shift clearly (a correct geometry has none). Prints the median and p99 of the mean difference, the minimum
PSNR and how many images are best matched shifted; with --json one JSON
object.
"""

import json
import os
import sys

import numpy as np
from PIL import Image

import tsock  # noqa: E402


def reference(path, size):
    """torchvision's Resize(round(size/0.875)) + CenterCrop(size), with
    the geometry of torchvision 0.14's functional transforms."""
    im = Image.open(path).convert("RGB")
    w, h = im.size
    short, long_ = (w, h) if w <= h else (h, w)
    r = round(size / 0.875)
    new_short, new_long = r, int(r * long_ / short)
    nw, nh = (new_short, new_long) if w <= h else (new_long, new_short)
    im = im.resize((nw, nh), Image.BILINEAR)
    top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))
    return np.asarray(im.crop((left, top, left + size, top + size))).transpose(2, 0, 1)


def folder_files(folder):
    """The files in ImageFolder order: sorted classes, sorted files."""
    out = []
    for c in sorted(e.name for e in os.scandir(folder) if e.is_dir()):
        d = os.path.join(folder, c)
        out += [os.path.join(d, f) for f in sorted(os.listdir(d))]
    return out


def compare(mount, folder, size):
    files = folder_files(folder)
    diffs, psnrs, shifted = [], [], 0
    with tsock.Consumer(mount) as c:
        for batch in c.epochs().__next__():
            for img, idx in zip(batch["images"], batch["indices"]):
                ref = reference(files[int(idx)], size).astype(np.int16)
                got = img.astype(np.int16)
                d = np.abs(got - ref)
                diffs.append(float(d.mean()))
                mse = float((d.astype(np.float64) ** 2).mean())
                psnrs.append(99.0 if mse == 0 else 10 * np.log10(255 ** 2 / mse))
                # the shift of the reference that matches best, on the inner part
                m = 2
                inner = got[:, m:-m, m:-m]
                at = {(dx, dy): np.abs(inner - ref[:, m + dy:size - m + dy, m + dx:size - m + dx]).mean()
                      for dy in range(-m, m + 1) for dx in range(-m, m + 1)}
                # shifted: some shift matches clearly better than none (flat
                # pictures match every shift about as well)
                shifted += int(min(at.values()) < 0.8 * at[(0, 0)] - 0.05)
    diffs.sort()
    return {
        "images": len(diffs),
        "mean_abs_diff_median": diffs[len(diffs) // 2],
        "mean_abs_diff_p99": diffs[min(len(diffs) - 1, int(0.99 * len(diffs)))],
        "mean_abs_diff_max": diffs[-1],
        "psnr_min": min(psnrs),
        "psnr_median": sorted(psnrs)[len(psnrs) // 2],
        "best_matched_shifted": shifted,
    }


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    r = compare(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    if "--json" in sys.argv[4:]:
        print(json.dumps(r))
        return
    print(f"{r['images']} images: mean |diff| median {r['mean_abs_diff_median']:.2f}, "
          f"p99 {r['mean_abs_diff_p99']:.2f}, max {r['mean_abs_diff_max']:.2f}; "
          f"PSNR min {r['psnr_min']:.1f} dB, median {r['psnr_median']:.1f} dB; "
          f"best matched shifted: {r['best_matched_shifted']}")


if __name__ == "__main__":
    main()
