#!/usr/bin/env python3
# Writes Fashion-MNIST as "bring your own data" for issue 18's acceptance run, in both formats Lathe
# reads besides IDX, holding the very same pixels:
#   OUT/fashion32.npz          x_train uint8 (N, 3, 32, 32), y_train int64 (N), x_test, y_test (np.savez)
#   OUT/fashion32/train/<class>/NNNNN.png and OUT/fashion32/test/<class>/NNNNN.png (8-bit RGB, lossless)
# Each 28x28 image is zero-padded by 2 pixels to 32x32 and tinted with a colour drawn per image
# (each of R, G, B scaled by a factor in [0.4, 1.0] from a seeded generator), so the channels differ
# and the colour carries no label. Class folder names are the ten Fashion-MNIST class names, prefixed
# with their label ("0-tshirt", ...) so their sorted order is the label order.
# numpy only (PNG written with zlib); prints one JSON line with what it wrote.
#   python bench/peers/make_byod_data.py --out /tmp/byod [--train 60000] [--test 10000] [--seed 0]
# Then:  lathe-cli run cfg.json --set data.dataset=npz --set data.path=/tmp/byod/fashion32.npz
#        lathe-cli run cfg.json --set data.dataset=folder --set data.path=/tmp/byod/fashion32 \
#                               --set data.image_size=32 --set data.channels=3
import argparse
import gzip
import json
import os
import struct
import sys
import zlib

import numpy as np

CLASSES = ["0-tshirt", "1-trouser", "2-pullover", "3-dress", "4-coat",
           "5-sandal", "6-shirt", "7-sneaker", "8-bag", "9-ankle-boot"]


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    ndim = magic & 0xff
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data_dir, name):
    for candidate in (name, name + ".gz"):
        p = os.path.join(data_dir, candidate)
        if os.path.exists(p):
            return p
    sys.exit(f"make_byod_data.py: {name}(.gz) not found in {data_dir} (apt-get install dataset-fashion-mnist)")


def tinted(images, rng):
    """(N, 28, 28) uint8 -> (N, 3, 32, 32) uint8: padded by 2, each channel scaled by a per-image factor."""
    n = images.shape[0]
    padded = np.zeros((n, 32, 32), dtype=np.float64)
    padded[:, 2:30, 2:30] = images
    tint = rng.uniform(0.4, 1.0, size=(n, 3))
    out = np.rint(padded[:, None, :, :] * tint[:, :, None, None])
    return np.clip(out, 0, 255).astype(np.uint8)


def png_bytes(chw):
    """An 8-bit RGB PNG of a (3, H, W) uint8 array (filter 0 on every row)."""
    c, h, w = chw.shape
    rows = np.ascontiguousarray(chw.transpose(1, 2, 0)).reshape(h, w * c)
    raw = b"".join(b"\x00" + rows[y].tobytes() for y in range(h))

    def chunk(kind, payload):
        return (struct.pack(">I", len(payload)) + kind + payload +
                struct.pack(">I", zlib.crc32(kind + payload) & 0xffffffff))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def main():
    p = argparse.ArgumentParser(description="Fashion-MNIST as a 3-channel 32x32 .npz and PNG folder")
    p.add_argument("--out", required=True)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--train", type=int, default=60000, help="first N training images")
    p.add_argument("--test", type=int, default=10000, help="first N test images")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    rng = np.random.default_rng(a.seed)
    splits = {}
    for split, prefix, n in (("train", "train", a.train), ("test", "t10k", a.test)):
        x = read_idx(find(a.data, f"{prefix}-images-idx3-ubyte"))[:n]
        y = read_idx(find(a.data, f"{prefix}-labels-idx1-ubyte"))[:n].astype(np.int64)
        order = np.argsort(y, kind="stable")  # the folder's reading order: class, then file name
        splits[split] = (tinted(x, rng)[order], y[order])

    os.makedirs(a.out, exist_ok=True)
    npz = os.path.join(a.out, "fashion32.npz")
    np.savez(npz, x_train=splits["train"][0], y_train=splits["train"][1],
             x_test=splits["test"][0], y_test=splits["test"][1])
    root = os.path.join(a.out, "fashion32")
    files = 0
    for split, (x, y) in splits.items():
        for name in CLASSES:
            os.makedirs(os.path.join(root, split, name), exist_ok=True)
        for i in range(x.shape[0]):  # i increases within each class: names sort in the .npz's order
            with open(os.path.join(root, split, CLASSES[y[i]], f"{i:05d}.png"), "wb") as f:
                f.write(png_bytes(x[i]))
            files += 1
    print(json.dumps({"npz": npz, "npz_bytes": os.path.getsize(npz), "folder": root, "png_files": files,
                      "train": int(splits["train"][0].shape[0]), "test": int(splits["test"][0].shape[0]),
                      "shape": [3, 32, 32], "seed": a.seed}))


if __name__ == "__main__":
    main()
