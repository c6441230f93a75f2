#!/usr/bin/env python3
# PyTorch cross-check of Lathe's distillation: a dense student (784-H-10) trained alone and distilled
# from a Lathe-trained teacher loaded from its safetensors (same parameter names), with Lathe's recipe
# and loss: alpha T^2 KL(p_t || p_s) + (1 - alpha) CE (Hinton et al.), optionally plus
# feature_weight * MSE(proj(student node 1), teacher node 8) through a Linear projection (Lathe's
# feature_loss.h: per sample the mean over the teacher activation's elements, averaged over the batch;
# the projection is a Linear with PyTorch's default init, trained by the student's optimizer type,
# learning rate and schedule), and optionally with the student's images augmented like Lathe's loader
# (data.augment x distill.student_augment_factor; the teacher then sees the same augmented batch).
#
# Recipe: SGD momentum 0.9, lr 0.05 constant or per-step cosine to 0, batch 128 with the last partial
# batch kept, the first N training images (data.train_subset). The epoch order is Lathe's own
# (DataLoader::epoch_order: Fisher-Yates driven by splitmix64 seeded from (seed, epoch), ported here
# bit for bit), so both frameworks see the same batches; initialisation and augmentation draws are
# PyTorch's (same distributions, other values). A cell can instead start from given weights
# ("init_from": a safetensors of the student, e.g. the --export-init file Lathe's model.init_from
# reads) and take the feature projection's initial weights from Lathe's own rule ("projection_init":
# "lathe": Linear::create_params drawn from Rng(seed * 0xD1B54A32D192ED03 + 0x9a0), ported bit for
# bit), so that both frameworks start every weight from the same values (distill_study.py --same-init).
#
#   torch_distill.py --teacher runs/<id>/model.safetensors [--seeds 0 1 2] [--temperature 4] [--alpha 0.7]
#       the 5-epoch cosine comparison of issue 5 (prints one JSON object)
#   torch_distill.py --teacher T.safetensors --cells cells.json --out results.jsonl
#       every cell of cells.json (a list of objects: id, subset, epochs, schedule, hidden, seed, kd,
#       temperature, alpha, feature_weight, augment {shift_px, hflip, noise_std, strength}, optional
#       init_from and projection_init); one JSON line per cell appended to --out; cells whose id is
#       already in --out are skipped
#   torch_distill.py --export-init DIR --hidden 64 --seeds 0 1 2
#       writes DIR/student<H>-seed<S>.safetensors: the initial weights train_cell starts from for that
#       seed, for Lathe's model.init_from (the same-init parity check of bench/distill_study.py)
import argparse
import hashlib
import json
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn

import fmnist_peer as fp

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
SHUFFLE_SALT = 0x53485546464C45  # "SHUFFLE", engine/data/loader.cpp


def mix64(key, value):
    """engine/data/loader.cpp mix64, in 64-bit unsigned arithmetic."""
    z = key ^ ((value + GOLDEN + ((key << 6) & M64) + (key >> 2)) & M64)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class LatheRng:
    """engine/core/rng.h: splitmix64, the constructor discards one value."""

    def __init__(self, seed):
        self.state = (seed ^ GOLDEN) & M64
        self.next_u64()

    def next_u64(self):
        self.state = (self.state + GOLDEN) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)


_ORDERS = {}


def lathe_epoch_order(seed, epoch, count):
    """DataLoader::epoch_order(epoch) for a dataset of `count` images and LoaderOptions.seed = seed."""
    key = (seed, epoch, count)
    if key not in _ORDERS:
        rng = LatheRng(mix64(mix64(seed, SHUFFLE_SALT), epoch))
        order = list(range(count))
        for i in range(count, 1, -1):
            j = rng.next_u64() % i
            order[i - 1], order[j] = order[j], order[i - 1]
        _ORDERS[key] = torch.tensor(order, dtype=torch.int64)
    return _ORDERS[key]


def lathe_linear_init(rng, fan_in, fan_out):
    """engine/nn/linear.cpp Linear::create_params: weight [out, in] then bias [out], each element
    uniform(-b, b) with b = 1/sqrt(in) drawn in row-major order (Rng::uniform: 53 bits), stored as f32."""
    bound = 1.0 / math.sqrt(fan_in)

    def draw(n):
        return [-bound + (bound - -bound) * ((rng.next_u64() >> 11) * 2.0 ** -53) for _ in range(n)]

    w = torch.tensor(draw(fan_out * fan_in), dtype=torch.float64).to(torch.float32).reshape(fan_out, fan_in)
    b = torch.tensor(draw(fan_out), dtype=torch.float64).to(torch.float32)
    return w, b


def lathe_projection_init(seed, fan_in, fan_out):
    """The feature projection Lathe's distillation stage creates for one pair (engine/run/stage_distill.cpp:
    Rng proj_rng(cfg.seed * 0xD1B54A32D192ED03 + 0x9a0), then the Distiller's one Linear)."""
    return lathe_linear_init(LatheRng((seed * 0xD1B54A32D192ED03 + 0x9A0) & M64), fan_in, fan_out)


def build_student(hidden):
    return nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def augment_batch(xb, aug, gen):
    """Lathe's augment.h rule on normalised [B,1,28,28] images: shift S = round(shift_px * strength)
    (black fill), flip with p = 0.5 * min(strength, 1) before the shift, noise sigma = noise_std *
    strength in [0,1]-intensity units. Draws come from `gen` (PyTorch's generator, not Lathe's)."""
    s = aug.get("strength", 1.0)
    shift = int(math.floor(aug.get("shift_px", 0) * s + 0.5)) if s > 0 else 0
    p_flip = 0.5 * min(s, 1.0) if aug.get("hflip") and s > 0 else 0.0
    sigma = aug.get("noise_std", 0.0) * s
    out = xb.clone()
    b = xb.shape[0]
    if p_flip > 0:
        flip = torch.rand(b, generator=gen) < p_flip
        out[flip] = out[flip].flip(-1)
    if shift > 0:
        black = (0.0 - fp.MEAN) / fp.STD
        padded = F.pad(out, (shift, shift, shift, shift), value=black)
        d = torch.randint(-shift, shift + 1, (b, 2), generator=gen)
        for i in range(b):
            dx, dy = int(d[i, 0]), int(d[i, 1])
            # content moves right by dx and down by dy: out[r, c] = in[r - dy, c - dx]
            out[i] = padded[i, :, shift - dy:shift - dy + 28, shift - dx:shift - dx + 28]
    if sigma > 0:
        out = out + torch.randn(out.shape, generator=gen) * (sigma / fp.STD)
    return out


def teacher_outputs(teacher, x, batch=500):
    """Teacher logits and its node-8 activation (the ReLU after the 256-wide Linear), eval mode."""
    logits, feats = [], []
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            h = teacher[:9](x[i:i + batch])
            feats.append(h)
            logits.append(teacher[9](h))
    return torch.cat(logits), torch.cat(feats)


def train_cell(cell, x_all, y_all, xt, yt, teacher, t_logits, t_feats, batch=128, lr=0.05):
    """One run: returns the test accuracy of the trained student."""
    n = cell.get("subset") or x_all.shape[0]
    x, y = x_all[:n], y_all[:n]
    seed, epochs, hidden = cell["seed"], cell["epochs"], cell.get("hidden", 64)
    kd = cell.get("kd", False)
    T, alpha = cell.get("temperature", 4.0), cell.get("alpha", 0.7)
    fw = cell.get("feature_weight", 0.0) if kd else 0.0
    aug = cell.get("augment") or {}
    augmented = bool(aug) and aug.get("strength", 1.0) > 0 and (
        aug.get("shift_px", 0) > 0 or aug.get("hflip") or aug.get("noise_std", 0) > 0)
    torch.manual_seed(seed)
    model = build_student(hidden)
    init_check = None
    if cell.get("init_from"):  # the same file Lathe's model.init_from reads
        given = load_file(cell["init_from"])
        own = model.state_dict()
        if set(given) != set(own) or any(given[k].shape != own[k].shape for k in own):
            raise ValueError(f"{cell['init_from']}: tensors {sorted((k, tuple(v.shape)) for k, v in given.items())}, "
                             f"the 784-{hidden}-10 student has {sorted((k, tuple(v.shape)) for k, v in own.items())}")
        init_check = {"init_equals_seeded": all(torch.equal(given[k], own[k]) for k in own)}
        model.load_state_dict(given)
    params = list(model.parameters())
    proj = None
    if fw > 0:
        proj = nn.Linear(hidden, t_feats.shape[1])  # drawn even when replaced, so the RNG stream is unchanged
        if cell.get("projection_init") == "lathe":
            w, b = lathe_projection_init(seed, hidden, t_feats.shape[1])
            with torch.no_grad():
                proj.weight.copy_(w)
                proj.bias.copy_(b)
        elif cell.get("projection_init") not in (None, "torch"):
            raise ValueError(f"cell {cell.get('id')}: projection_init '{cell['projection_init']}'; allowed: torch, lathe")
        params += list(proj.parameters())
    opt = torch.optim.SGD(params, lr=lr, momentum=fp.MOMENTUM)
    steps_per_epoch = math.ceil(n / batch)
    total = steps_per_epoch * epochs
    gen = torch.Generator().manual_seed(seed)
    step = 0
    for epoch in range(epochs):
        model.train()
        order = lathe_epoch_order(seed, epoch, n)
        for start in range(0, n, batch):
            lr_now = lr if cell.get("schedule", "cosine") == "constant" else \
                0.5 * lr * (1 + math.cos(math.pi * min(1.0, step / total)))
            for g in opt.param_groups:
                g["lr"] = lr_now
            idx = order[start:start + batch]
            xb = x[idx]
            if augmented:
                xb = augment_batch(xb, aug, gen)
            flat = xb.reshape(xb.shape[0], 784)
            hid = model[1](model[0](flat))
            logits = model[2](hid)
            loss = F.cross_entropy(logits, y[idx])
            if kd:
                if augmented:  # the teacher sees the student's (augmented) batch
                    with torch.no_grad():
                        th = teacher[:9](xb)
                        tl = teacher[9](th)
                else:
                    tl, th = t_logits[idx], t_feats[idx]
                soft = F.kl_div(F.log_softmax(logits / T, 1), F.softmax(tl / T, 1), reduction="batchmean") * T * T
                loss = alpha * soft + (1 - alpha) * loss
                if proj is not None:
                    loss = loss + fw * F.mse_loss(proj(hid), th)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
    return fp.accuracy(model, "student", xt, yt), init_check


def load_teacher(path):
    teacher = fp.build_model("teacher")
    teacher.load_state_dict(load_file(path))
    teacher.eval()
    return teacher


def teacher_cache(teacher_path, teacher, x, cache_dir):
    """Teacher outputs over the training images, stored next to the results (keyed by the weights)."""
    digest = hashlib.sha256(open(teacher_path, "rb").read()).hexdigest()[:16]
    path = os.path.join(cache_dir, f"torch-teacher-{digest}.pt") if cache_dir else None
    if path and os.path.exists(path):
        d = torch.load(path)
        return d["logits"], d["feats"]
    logits, feats = teacher_outputs(teacher, x)
    if path:
        torch.save({"logits": logits, "feats": feats}, path)
    return logits, feats


def run_cells(a):
    x, y = fp.load_split(a.data, "train")
    xt, yt = fp.load_split(a.data, "t10k")
    teacher = load_teacher(a.teacher)
    t_logits, t_feats = teacher_cache(a.teacher, teacher, x, os.path.dirname(os.path.abspath(a.out)))
    done = set()
    if os.path.exists(a.out):
        with open(a.out) as f:
            done = {json.loads(line)["id"] for line in f if line.strip()}
    with open(a.cells) as f:
        cells = json.load(f)
    teacher_acc = None
    for cell in cells:
        if cell["id"] in done:
            continue
        if teacher_acc is None:
            teacher_acc = fp.accuracy(teacher, "teacher", xt, yt)
        acc, init_check = train_cell(cell, x, y, xt, yt, teacher, t_logits, t_feats)
        row = dict(cell, test_accuracy=acc, teacher_test_accuracy=teacher_acc, torch=torch.__version__, **(init_check or {}))
        with open(a.out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{cell['id']}: {100 * acc:.2f}%", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--teacher", default=None, help="Lathe teacher model.safetensors")
    p.add_argument("--export-init", default=None, help="folder for the students' initial weights")
    p.add_argument("--hidden", type=int, default=64, help="the student's hidden width for --export-init")
    p.add_argument("--data", default=fp.DEFAULT_DATA)
    p.add_argument("--cells", default=None, help="JSON list of cells (see the header); with --out")
    p.add_argument("--out", default=None, help="JSON-lines results for --cells")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--temperature", type=float, default=4.0)
    p.add_argument("--alpha", type=float, default=0.7)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.export_init:
        from safetensors.torch import save_file
        os.makedirs(a.export_init, exist_ok=True)
        for seed in a.seeds:
            torch.manual_seed(seed)
            model = build_student(a.hidden)
            save_file({k: v.contiguous() for k, v in model.state_dict().items()},
                      os.path.join(a.export_init, f"student{a.hidden}-seed{seed}.safetensors"))
        return
    if not a.teacher:
        p.error("--teacher is required")
    if a.cells:
        if not a.out:
            p.error("--cells needs --out")
        run_cells(a)
        return
    x, y = fp.load_split(a.data, "train")
    xt, yt = fp.load_split(a.data, "t10k")
    teacher = load_teacher(a.teacher)
    t_logits, t_feats = teacher_outputs(teacher, x)
    out = {"peer": "pytorch", "torch": torch.__version__, "teacher_test_accuracy": fp.accuracy(teacher, "teacher", xt, yt),
           "temperature": a.temperature, "alpha": a.alpha, "epochs": a.epochs, "lr": 0.05, "rows": []}
    for seed in a.seeds:
        common = {"seed": seed, "epochs": a.epochs, "schedule": "cosine", "hidden": 64,
                  "temperature": a.temperature, "alpha": a.alpha}
        base, _ = train_cell(dict(common, kd=False), x, y, xt, yt, teacher, t_logits, t_feats)
        dist, _ = train_cell(dict(common, kd=True), x, y, xt, yt, teacher, t_logits, t_feats)
        out["rows"].append({"seed": seed, "baseline": base, "distilled": dist})
    n = len(out["rows"])
    out["mean_baseline"] = sum(r["baseline"] for r in out["rows"]) / n
    out["mean_distilled"] = sum(r["distilled"] for r in out["rows"]) / n
    out["margin_pt"] = 100 * (out["mean_distilled"] - out["mean_baseline"])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
