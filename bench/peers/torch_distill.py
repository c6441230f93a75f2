#!/usr/bin/env python3
# PyTorch cross-check of the issue-5 distillation experiment: the student (784-64-10) trained alone
# and distilled from a teacher (alpha T^2 KL(p_t || p_s) + (1 - alpha) CE, Hinton et al.), with
# Lathe's recipe (SGD momentum 0.9, lr 0.05 with a per-step cosine decay to 0, batch 128, 5 epochs)
# over several seeds. The teacher is a Lathe-trained model loaded from its safetensors (same
# parameter names), so both frameworks distil from the very same teacher. Prints one JSON object.
#   torch_distill.py --teacher runs/<id>/model.safetensors [--seeds 0 1 2] [--temperature 4] [--alpha 0.7]
import argparse
import json
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import load_file

import fmnist_peer as fp


def train_student(x, y, teacher_logits, seed, epochs, lr, batch, temperature, alpha):
    torch.manual_seed(seed)
    model = fp.build_model("student")
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=fp.MOMENTUM)
    steps_per_epoch = math.ceil(x.shape[0] / batch)
    total = steps_per_epoch * epochs
    gen = torch.Generator().manual_seed(seed)
    step = 0
    for _ in range(epochs):
        model.train()
        order = torch.randperm(x.shape[0], generator=gen)
        for start in range(0, x.shape[0], batch):
            for g in opt.param_groups:
                g["lr"] = 0.5 * lr * (1 + math.cos(math.pi * step / total))
            idx = order[start:start + batch]
            logits = model(fp.prepare_input("student", x[idx]))
            loss = F.cross_entropy(logits, y[idx])
            if teacher_logits is not None:
                soft = F.kl_div(F.log_softmax(logits / temperature, 1), F.softmax(teacher_logits[idx] / temperature, 1),
                                reduction="batchmean") * temperature * temperature
                loss = alpha * soft + (1 - alpha) * loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
    return model


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--teacher", required=True, help="Lathe teacher model.safetensors")
    p.add_argument("--data", default=fp.DEFAULT_DATA)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--temperature", type=float, default=4.0)
    p.add_argument("--alpha", type=float, default=0.7)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    x, y = fp.load_split(a.data, "train")
    xt, yt = fp.load_split(a.data, "t10k")
    teacher = fp.build_model("teacher")
    teacher.load_state_dict(load_file(a.teacher))
    teacher.eval()
    with torch.no_grad():
        t_logits = torch.cat([teacher(x[i:i + 1000]) for i in range(0, x.shape[0], 1000)])
    out = {"peer": "pytorch", "torch": torch.__version__, "teacher_test_accuracy": fp.accuracy(teacher, "teacher", xt, yt),
           "temperature": a.temperature, "alpha": a.alpha, "epochs": a.epochs, "lr": a.lr, "rows": []}
    for seed in a.seeds:
        base = fp.accuracy(train_student(x, y, None, seed, a.epochs, a.lr, a.batch, a.temperature, a.alpha),
                           "student", xt, yt)
        dist = fp.accuracy(train_student(x, y, t_logits, seed, a.epochs, a.lr, a.batch, a.temperature, a.alpha),
                           "student", xt, yt)
        out["rows"].append({"seed": seed, "baseline": base, "distilled": dist})
    n = len(out["rows"])
    out["mean_baseline"] = sum(r["baseline"] for r in out["rows"]) / n
    out["mean_distilled"] = sum(r["distilled"] for r in out["rows"]) / n
    out["margin_pt"] = 100 * (out["mean_distilled"] - out["mean_baseline"])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
