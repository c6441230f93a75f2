#!/usr/bin/env python3
# PyTorch peer for Lathe's training comparison: trains the reference models on Fashion-MNIST with
# Lathe's recipe (fmnist_peer.py) and prints JSON lines, either training throughput (samples/s of
# forward+backward+SGD step on pre-loaded batches) or per-epoch test accuracy.
import argparse
import json
import os
import statistics
import time

import torch

import fmnist_peer as fp

DESCRIPTION = "Train Lathe's reference models in PyTorch; print throughput or accuracy as JSON lines."


def parse_args():
    p = argparse.ArgumentParser(description=DESCRIPTION)
    p.add_argument("--mode", choices=("throughput", "train"), default="throughput")
    p.add_argument("--model", choices=fp.MODELS, default="cnn")
    p.add_argument("--data", default=fp.DEFAULT_DATA, help="folder with the Fashion-MNIST .gz IDX files")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=None, help="default: 0.05 dense, 0.02 conv models")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--steps", type=int, default=200, help="throughput: timed steps per repeat")
    p.add_argument("--warmup", type=int, default=20, help="throughput: untimed steps first")
    p.add_argument("--repeats", type=int, default=3, help="throughput: the median is reported")
    p.add_argument("--epochs", type=int, default=5, help="train: epochs")
    p.add_argument("--channels-last", choices=("auto", "on", "off"), default="auto",
                   help="conv models; auto = the faster of both in throughput mode, off in train mode")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--autocast", choices=("off", "bf16"), default="off",
                   help="throughput: forward and loss under torch.autocast('cpu', bfloat16), backward outside")
    return p.parse_args()


def new_model(args, channels_last):
    torch.manual_seed(args.seed)
    model = fp.build_model(args.model)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model, fp.make_optimizer(model, args.model, args.lr)


def measure(args, x, y, channels_last):
    """Median samples/s over `repeats` runs of `steps` timed training steps."""
    model, opt = new_model(args, channels_last)
    model.train()
    loss_fn = torch.nn.CrossEntropyLoss()
    n_batches = min(x.shape[0] // args.batch, args.warmup + args.steps)
    batches = [(fp.prepare_input(args.model, x[i * args.batch:(i + 1) * args.batch], channels_last),
                y[i * args.batch:(i + 1) * args.batch]) for i in range(n_batches)]

    autocast = args.autocast == "bf16"

    def run(steps, offset):
        for s in range(steps):
            xb, yb = batches[(offset + s) % n_batches]
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()

    run(args.warmup, 0)
    rates = []
    for r in range(args.repeats):
        start = time.perf_counter()
        run(args.steps, args.warmup + r * args.steps)
        rates.append(args.steps * args.batch / (time.perf_counter() - start))
    return statistics.median(rates)


def throughput(args, x, y):
    variants = [False]
    if fp.is_conv(args.model):
        variants = {"auto": [False, True], "on": [True], "off": [False]}[args.channels_last]
    rates = {cl: measure(args, x, y, cl) for cl in variants}
    best = max(rates, key=rates.get)
    record = {"peer": "pytorch", "torch": torch.__version__, "model": args.model, "batch": args.batch,
              "threads": args.threads, "samples_per_s": round(rates[best], 1), "channels_last": best,
              "autocast": args.autocast,
              "mkldnn": torch.backends.mkldnn.is_available(), "device": "cpu"}
    if len(rates) > 1:
        record["samples_per_s_by_channels_last"] = {str(k).lower(): round(v, 1) for k, v in rates.items()}
    print(json.dumps(record), flush=True)


def train(args, x, y):
    channels_last = fp.is_conv(args.model) and args.channels_last == "on"
    model, opt = new_model(args, channels_last)
    x_test, y_test = fp.load_split(args.data, "t10k")
    gen = torch.Generator().manual_seed(args.seed)
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        loss = fp.train_epoch(model, args.model, opt, x, y, args.batch, gen, channels_last)
        seconds = time.perf_counter() - start
        acc = fp.accuracy(model, args.model, x_test, y_test, channels_last=channels_last)
        print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "model": args.model,
                          "epoch": epoch, "train_loss": round(loss, 5), "test_acc": round(acc, 4),
                          "epoch_s": round(seconds, 2), "samples_per_s": round(x.shape[0] / seconds, 1),
                          "threads": args.threads, "channels_last": channels_last}), flush=True)


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    x, y = fp.load_split(args.data, "train")
    (throughput if args.mode == "throughput" else train)(args, x, y)


if __name__ == "__main__":
    main()
