#!/usr/bin/env python3
# Safetensors interop check between Lathe and PyTorch, both directions:
#   check_safetensors.py MODEL.safetensors --model mlp   load a Lathe-written file strictly into the
#                                                        matching nn.Sequential, print test accuracy
#   check_safetensors.py --export OUT --model cnn        write a PyTorch model (fresh, or trained with
#                                                        --epochs) for Lathe to load; prints its accuracy
# One JSON line either way, so Lathe can compare the accuracy it gets on the same weights.
import argparse
import json
import sys

import torch

import fmnist_peer as fp

try:
    from safetensors.torch import load_file, save_file
except ImportError:
    sys.exit("check_safetensors.py: the 'safetensors' package is missing; run bench/peers/setup-venv.sh "
             "and use the python it prints")


def parse_args():
    p = argparse.ArgumentParser(description="Load or export Lathe reference models as safetensors.")
    p.add_argument("path", nargs="?", help="Lathe-written .safetensors file to load and evaluate")
    p.add_argument("--model", choices=fp.MODELS, required=True)
    p.add_argument("--export", metavar="OUT", help="write a PyTorch model to OUT instead of loading")
    p.add_argument("--epochs", type=int, default=0, help="export: train this many epochs first")
    p.add_argument("--data", default=fp.DEFAULT_DATA)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if (args.path is None) == (args.export is None):
        p.error("give exactly one of: a .safetensors file to load, or --export OUT")
    return args


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    model = fp.build_model(args.model)
    x_test, y_test = fp.load_split(args.data, "t10k")
    record = {"peer": "pytorch", "torch": torch.__version__, "model": args.model}
    if args.export:
        if args.epochs > 0:
            x, y = fp.load_split(args.data, "train")
            opt = fp.make_optimizer(model, args.model)
            gen = torch.Generator().manual_seed(args.seed)
            for _ in range(args.epochs):
                fp.train_epoch(model, args.model, opt, x, y, 128, gen)
        tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        save_file(tensors, args.export, metadata={"format": "pt", "model": args.model})
        record.update(exported=args.export, epochs=args.epochs)
    else:
        tensors = load_file(args.path)
        model.load_state_dict(tensors, strict=True)
        record.update(loaded=args.path, dtypes=sorted({str(t.dtype) for t in tensors.values()}))
    record.update(tensors=len(tensors), test_acc=round(fp.accuracy(model, args.model, x_test, y_test), 4))
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
