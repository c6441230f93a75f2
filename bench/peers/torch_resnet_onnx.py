#!/usr/bin/env python3
# A small ResNet-style CNN with BatchNorm and a residual block, trained in PyTorch on Fashion-MNIST
# and exported with torch.onnx.export, for Lathe to import (model.onnx) at the same test accuracy.
# The block is pre-activation (BN -> ReLU -> conv, as ResNet v2), so the exported graph keeps
# BatchNormalization nodes: the exporter folds a BN only into a conv whose output feeds nothing else.
#   torch_resnet_onnx.py --out resnet.onnx [--epochs 1] [--train-subset N]
# Default: 1x28x28 Fashion-MNIST from IDX, normalised with its constants (as Lathe does for IDX).
# Other shapes (--channels C --size S, e.g. 3 and 32) train on a .npz that make_byod_data.py wrote
# (--npz FILE: x_train (N,C,S,S) uint8, y_train, x_test, y_test), normalised per channel with the
# mean and population std of the training split (after --train-subset) computed as Lathe computes
# them for data.dataset = "npz" / "folder" (double sums of v/255, rounded to float32, then the
# float32 table (v/255 - mean) / std), so Lathe's test accuracy on the imported file is PyTorch's.
#   torch_resnet_onnx.py --channels 3 --size 32 --npz /tmp/byod/fashion32.npz --out resnet32.onnx
# One JSON line on stdout (torch.onnx.export's progress goes to stderr): {"file",
# "pytorch_test_accuracy", "epochs", "torch", "ops": {op: count}, "input", "train_samples",
# "test_samples", "normalisation"}.
import argparse
import contextlib
import json
import sys

import numpy as np
import torch
import torch.nn as nn

import fmnist_peer as fp

try:
    import onnx
except ImportError:
    sys.exit("torch_resnet_onnx.py: needs 'onnx' and 'onnxscript' (bench/peers/setup-venv.sh installs them)")


class PreActBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(c)
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        y = self.conv1(torch.relu(self.bn1(x)))
        y = self.conv2(torch.relu(self.bn2(y)))
        return x + y


class SmallResNet(nn.Module):
    def __init__(self, c=16, classes=10, in_channels=1, size=28):
        super().__init__()
        self.stem = nn.Conv2d(in_channels, c, 3, padding=1)
        self.block = PreActBlock(c)
        self.bn = nn.BatchNorm2d(c)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(c * (size // 2) * (size // 2), classes)

    def forward(self, x):
        x = self.block(self.stem(x))
        x = self.pool(torch.relu(self.bn(x)))
        return self.fc(torch.flatten(x, 1))


def channel_stats(x):
    """x (N, C, H, W) uint8 -> per-channel (mean, std) as float32, as Lathe's compute_channel_stats:
    sums of v/255 and of its squares in double, population variance, std 1 for a constant channel."""
    v = x.astype(np.float64) / 255.0
    n = x.shape[0] * x.shape[2] * x.shape[3]
    mean = v.sum(axis=(0, 2, 3)) / n
    var = np.maximum(0.0, (v * v).sum(axis=(0, 2, 3)) / n - mean * mean)
    std = np.sqrt(var)
    std = np.where(std < 1e-6, 1.0, std)
    return mean.astype(np.float32), std.astype(np.float32)


def normalised(x, mean, std):
    """(N, C, H, W) uint8 -> float32 tensor through Lathe's per-channel table (v/255f - mean) / std."""
    levels = np.arange(256, dtype=np.float32) / np.float32(255.0)
    out = np.empty(x.shape, dtype=np.float32)
    for c in range(x.shape[1]):
        table = (levels - mean[c]) / std[c]
        out[:, c] = table[x[:, c]]
    return torch.from_numpy(out)


def load_npz(path, channels, size, train_subset):
    """make_byod_data.py's .npz -> normalised train/test tensors, labels and the statistics."""
    with np.load(path) as z:
        x, y, xt, yt = (z[k] for k in ("x_train", "y_train", "x_test", "y_test"))
    for name, a in (("x_train", x), ("x_test", xt)):
        if a.dtype != np.uint8 or a.ndim != 4 or a.shape[1:] != (channels, size, size):
            sys.exit(f"torch_resnet_onnx.py: {path}:{name} is {a.dtype} {a.shape}; expected uint8 "
                     f"(N, {channels}, {size}, {size}) as --channels/--size say")
    if train_subset:
        x, y = x[:train_subset], y[:train_subset]
    mean, std = channel_stats(x)
    return (normalised(x, mean, std), torch.from_numpy(y.astype(np.int64)), normalised(xt, mean, std),
            torch.from_numpy(yt.astype(np.int64)), {"mean": mean.tolist(), "std": std.tolist()})


def main():
    p = argparse.ArgumentParser(description="Train and export a small ResNet-style CNN as ONNX.")
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--train-subset", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--data", default=fp.DEFAULT_DATA)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--channels", type=int, default=1, help="input channels (1: IDX Fashion-MNIST; else --npz)")
    p.add_argument("--size", type=int, default=28, help="input height and width (even)")
    p.add_argument("--npz", default="", help="make_byod_data.py's .npz: train and test on it")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.channels < 1 or args.size < 2 or args.size % 2:
        sys.exit("torch_resnet_onnx.py: --channels >= 1 and an even --size >= 2")
    if not args.npz and (args.channels, args.size) != (1, 28):
        sys.exit("torch_resnet_onnx.py: --channels/--size other than 1/28 need --npz (bench/peers/make_byod_data.py)")
    torch.manual_seed(args.seed)
    if args.npz:
        x, y, xt, yt, norm = load_npz(args.npz, args.channels, args.size, args.train_subset)
    else:
        x, y = fp.load_split(args.data, "train")
        if args.train_subset:
            x, y = x[:args.train_subset], y[:args.train_subset]
        xt, yt = fp.load_split(args.data, "t10k")
        norm = {"mean": [fp.MEAN], "std": [fp.STD], "computed_on": "Fashion-MNIST constants"}
    classes = int(y.max()) + 1 if args.npz else 10  # Lathe's count for npz data; 10 for IDX
    model = SmallResNet(classes=classes, in_channels=args.channels, size=args.size)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    gen = torch.Generator().manual_seed(args.seed)
    for _ in range(args.epochs):
        fp.train_epoch(model, "cnn", opt, x, y, 128, gen)
    acc = fp.accuracy(model, "cnn", xt, yt)
    model.eval()
    # The exporter prints its progress on stdout; stdout is this script's JSON line, so that goes to
    # stderr (an export error still raises and ends the script with its traceback).
    with contextlib.redirect_stdout(sys.stderr):
        torch.onnx.export(model, (xt[:2],), args.out, input_names=["input"], output_names=["logits"],
                          opset_version=17, dynamic_shapes={"x": {0: torch.export.Dim("N")}}, external_data=False)
    ops = {}
    for n in onnx.load(args.out).graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(json.dumps({"file": args.out, "pytorch_test_accuracy": acc, "epochs": args.epochs, "torch": torch.__version__,
                      "ops": ops, "input": [args.channels, args.size, args.size], "train_samples": int(x.shape[0]),
                      "test_samples": int(xt.shape[0]), "normalisation": norm}))


if __name__ == "__main__":
    main()
