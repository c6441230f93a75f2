#!/usr/bin/env python3
# A small ResNet-style CNN with BatchNorm and a residual block, trained in PyTorch on Fashion-MNIST
# and exported with torch.onnx.export, for Lathe to import (model.onnx) at the same test accuracy.
# The block is pre-activation (BN -> ReLU -> conv, as ResNet v2), so the exported graph keeps
# BatchNormalization nodes: the exporter folds a BN only into a conv whose output feeds nothing else.
#   torch_resnet_onnx.py --out resnet.onnx [--epochs 1] [--train-subset N]
# One JSON line: {"file", "pytorch_test_accuracy", "epochs", "torch", "ops": {op: count}}.
import argparse
import json
import sys

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
    def __init__(self, c=16, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(1, c, 3, padding=1)
        self.block = PreActBlock(c)
        self.bn = nn.BatchNorm2d(c)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(c * 14 * 14, classes)

    def forward(self, x):
        x = self.block(self.stem(x))
        x = self.pool(torch.relu(self.bn(x)))
        return self.fc(torch.flatten(x, 1))


def main():
    p = argparse.ArgumentParser(description="Train and export a small ResNet-style CNN as ONNX.")
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--train-subset", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--data", default=fp.DEFAULT_DATA)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x, y = fp.load_split(args.data, "train")
    if args.train_subset:
        x, y = x[:args.train_subset], y[:args.train_subset]
    xt, yt = fp.load_split(args.data, "t10k")
    model = SmallResNet()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    gen = torch.Generator().manual_seed(args.seed)
    for _ in range(args.epochs):
        fp.train_epoch(model, "cnn", opt, x, y, 128, gen)
    acc = fp.accuracy(model, "cnn", xt, yt)
    model.eval()
    torch.onnx.export(model, (xt[:2],), args.out, input_names=["input"], output_names=["logits"], opset_version=17,
                      dynamic_shapes={"x": {0: torch.export.Dim("N")}}, external_data=False)
    ops = {}
    for n in onnx.load(args.out).graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(json.dumps({"file": args.out, "pytorch_test_accuracy": acc, "epochs": args.epochs, "torch": torch.__version__,
                      "ops": ops}))


if __name__ == "__main__":
    main()
