"""Cuts an ImageNet-like folder of real photographs out of big photos.

    realphotos.py OUT SRC_DIR... [--images N] [--classes K] [--seed S] [--detailed]

ImageNet's training JPEGs are photographs of 300-500 px on the shorter
side (median about 400x350, 110 KB), saved at varied qualities, a few
progressive, a few grayscale and a few CMYK. Generated images flatter a
decoder (flat areas compress to nothing), so tsock's benchmarks cut such
files from real photographs: Debian's wallpaper packages (see
scripts/realphotos.sh), whose photos are 1280-5640 px wide.

Each output file is a random crop of one photo (a third to all of its
shorter side, aspect 3:4 to 4:3), resized with Lanczos to 300-500 px on
its shorter side, saved as: quality 75-97; 4:2:0 mostly, some 4:2:2 and
4:4:4; 15% progressive; 6% grayscale; 3% CMYK (Adobe, inverted, as
Photoshop writes it and PIL reads it). --detailed takes crops at the
photos' own resolution (no downscale: every pixel is camera detail),
quality 95-97, 4:4:4: the most bits per pixel a photo set has.

Classes are groups of source photos, so a class's files share a look, as
an ImageNet class does. The output is deterministic for a seed and the
same sources. Prints the set's size and bits per pixel.
"""

import argparse
import os
import random
import sys

from PIL import Image


def photos(dirs):
    """The photographs under dirs: JPEGs in colour, at least 1000 px wide."""
    out = []
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if not f.lower().endswith((".jpg", ".jpeg")):
                    continue
                path = os.path.join(root, f)
                try:
                    with Image.open(path) as im:
                        if im.mode == "RGB" and min(im.size) >= 1000:
                            out.append(path)
                except OSError:
                    continue
    return sorted(set(out))


def cut(im, rng, detailed):
    """One ImageNet-sized crop of im."""
    w, h = im.size
    short = rng.randint(300, 500)
    ratio = rng.uniform(3 / 4, 4 / 3)
    if detailed:  # no downscale: the crop is already the output size
        cw, ch = (short, round(short * ratio)) if rng.random() < 0.5 else (round(short * ratio), short)
    else:
        side = rng.uniform(1 / 3, 1) * min(w, h)
        cw, ch = (side, side * ratio) if rng.random() < 0.5 else (side * ratio, side)
    cw, ch = min(int(cw), w), min(int(ch), h)
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    crop = im.crop((x, y, x + cw, y + ch))
    if not detailed:
        s = short / min(cw, ch)
        crop = crop.resize((max(1, round(cw * s)), max(1, round(ch * s))), Image.LANCZOS)
    return crop


def save(crop, path, rng, detailed):
    """Saves crop as a JPEG of a randomly drawn kind; returns the kind."""
    kind, opts = "rgb", {"quality": rng.randint(75, 97), "subsampling": 2}
    r = rng.random()
    if detailed:
        opts.update(quality=rng.randint(95, 97), subsampling=0)
    elif r < 0.06:
        kind, crop = "gray", crop.convert("L")
    elif r < 0.09:
        kind, crop = "cmyk", crop.convert("CMYK")
    elif r < 0.15:
        opts["subsampling"] = 0  # 4:4:4
    elif r < 0.22:
        opts["subsampling"] = 1  # 4:2:2
    if rng.random() < 0.15:
        opts["progressive"] = True
        kind += "+progressive"
    crop.save(path, "JPEG", optimize=rng.random() < 0.5, **opts)
    return kind


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("src", nargs="+")
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--detailed", action="store_true")
    a = ap.parse_args()
    if a.images < 1 or a.classes < 1:
        ap.error("--images and --classes must be positive")
    srcs = photos(a.src)
    if not srcs:
        sys.exit(f"realphotos: no colour JPEG of 1000 px or more under {' '.join(a.src)}")
    rng = random.Random(a.seed)
    classes = min(a.classes, len(srcs))
    groups = [srcs[i::classes] for i in range(classes)]
    kinds, nbytes, npix = {}, 0, 0
    for c, group in enumerate(groups):
        d = os.path.join(a.out, "class_%03d" % c)
        os.makedirs(d, exist_ok=True)
        n = a.images // classes + (c < a.images % classes)
        per = [n // len(group) + (i < n % len(group)) for i in range(len(group))]
        k = 0
        for path, count in zip(group, per):
            if count == 0:
                continue
            with Image.open(path) as im:
                im = im.convert("RGB")
                for _ in range(count):
                    crop = cut(im, rng, a.detailed)
                    out = os.path.join(d, "img_%05d.jpg" % k)
                    kind = save(crop, out, rng, a.detailed)
                    kinds[kind] = kinds.get(kind, 0) + 1
                    nbytes += os.path.getsize(out)
                    npix += crop.size[0] * crop.size[1]
                    k += 1
    total = sum(kinds.values())
    print(f"realphotos: {total} images in {classes} classes from {len(srcs)} photos, "
          f"{nbytes / total / 1024:.0f} KiB and {npix / total / 1000:.0f} kpixels each, "
          f"{8 * nbytes / npix:.2f} bits per pixel")
    print("realphotos: kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))


if __name__ == "__main__":
    main()
