#!/usr/bin/env python3
# PyTorch's own INT8 post-training quantization of Lathe's cnn (same architecture, eager-mode static
# PTQ with QuantStub/DeQuantStub, fused conv+ReLU and linear+ReLU, per-channel weights, the fbgemm or
# x86 backend), for bench/int8_cnn's comparison: inference samples/s of the f32 and INT8 models at
# batch 1 and 256 on the Fashion-MNIST test images, and both test accuracies. Weights: a Lathe
# model.safetensors (--weights, the same trained model Lathe quantizes) or PyTorch's init.
# Prints one JSON line on stdout.
#   torch_quant_cnn.py [--weights runs/<id>/model.safetensors] [--engine x86|fbgemm] [--threads N]
import argparse
import json
import os
import time

import torch
from torch import nn
from torch.ao import quantization as tq

import fmnist_peer as fp


class QuantCnn(nn.Module):
    """Lathe's cnn (fmnist_peer.build_model) between a QuantStub and a DeQuantStub; the Sequential
    keeps the state_dict names 0.*, 3.*, 7.*, 9.* so Lathe's safetensors load as they are."""

    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.body = fp.build_model("cnn")
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        return self.dequant(self.body(self.quant(x)))


def images_per_s(model, x, reps):
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t)
    times.sort()
    return x.shape[0] / times[len(times) // 2]


def accuracy(model, x, y):
    with torch.inference_mode():
        correct = 0
        for i in range(0, x.shape[0], 500):
            correct += (model(x[i:i + 500]).argmax(1) == y[i:i + 500]).sum().item()
    return correct / x.shape[0]


def main():
    p = argparse.ArgumentParser(description="PyTorch INT8 PTQ of Lathe's cnn: throughput and accuracy")
    p.add_argument("--weights", default="", help="Lathe model.safetensors of a trained cnn")
    p.add_argument("--data", default=fp.DEFAULT_DATA)
    p.add_argument("--engine", default="auto", help="quantized engine: x86, fbgemm, onednn or auto")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--calib", type=int, default=512, help="calibration images (training set)")
    p.add_argument("--reps", type=int, default=20)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    engines = torch.backends.quantized.supported_engines
    # auto: x86 (PyTorch >= 2.0), else fbgemm, else onednn (Debian's torch 1.13 ships only onednn/qnnpack).
    engine = a.engine if a.engine != "auto" else next(e for e in ("x86", "fbgemm", "onednn", "qnnpack") if e in engines)
    torch.backends.quantized.engine = engine

    xtr, ytr = fp.load_split(a.data, "train")
    xte, yte = fp.load_split(a.data, "t10k")
    model = QuantCnn().eval()
    if a.weights:
        from safetensors.torch import load_file
        model.body.load_state_dict(load_file(a.weights), strict=True)
    f32 = QuantCnn().eval()
    f32.load_state_dict(model.state_dict())

    model.qconfig = tq.get_default_qconfig(engine)  # per-channel s8 weights, u8 histogram activations
    tq.fuse_modules(model.body, [["0", "1"], ["3", "4"], ["7", "8"]], inplace=True)
    tq.prepare(model, inplace=True)
    with torch.inference_mode():
        for i in range(0, a.calib, 64):
            model(xtr[i:i + 64])
    tq.convert(model, inplace=True)

    out = {"peer": "pytorch", "torch": torch.__version__, "engine": engine, "threads": a.threads,
           "what": "inference images/s, eager static PTQ INT8 vs f32, Fashion-MNIST test images"}
    if a.weights:
        out["f32_test_accuracy"] = accuracy(f32, xte, yte)
        out["int8_test_accuracy"] = accuracy(model, xte, yte)
    for b in (1, 256):
        x = xte[:b].contiguous()
        out[f"batch_{b}"] = {"f32_samples_per_s": images_per_s(f32, x, a.reps),
                             "int8_samples_per_s": images_per_s(model, x, a.reps)}
        out[f"batch_{b}"]["int8_over_f32"] = (out[f"batch_{b}"]["int8_samples_per_s"] /
                                              out[f"batch_{b}"]["f32_samples_per_s"])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
