# Shared by the PyTorch peer scripts: Lathe's reference models as nn.Sequential, the Fashion-MNIST
# IDX reader and the training/evaluation loops, defined once so that throughput, accuracy and
# safetensors interop all use exactly the models and recipe that Lathe uses (docs: DESIGN.md).
import gzip
import os

import numpy as np
import torch
from torch import nn

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
MODELS = ("mlp", "cnn", "teacher", "student")
DEFAULT_LR = {"mlp": 0.05, "student": 0.05, "cnn": 0.02, "teacher": 0.02}
MOMENTUM = 0.9


def build_model(name):
    """Lathe's zoo model `name`. The dense models have no Flatten module (callers reshape the input
    to [B,784], see prepare_input) so their state_dict names are 0.*, 2.*, 4.* like Lathe's."""
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                             nn.Linear(256, 10))
    if name == "student":
        return nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))
    if name in ("cnn", "teacher"):
        c1, c2, hidden = (32, 64, 128) if name == "cnn" else (64, 128, 256)
        return nn.Sequential(nn.Conv2d(1, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(c2 * 7 * 7, hidden), nn.ReLU(),
                             nn.Linear(hidden, 10))
    raise ValueError(f"unknown model '{name}'; allowed: {', '.join(MODELS)}")


def is_conv(name):
    return name in ("cnn", "teacher")


def prepare_input(name, x, channels_last=False):
    """x: normalised [N,1,28,28] float32 -> the shape (and memory format) the model expects."""
    if not is_conv(name):
        return x.reshape(x.shape[0], 784)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def _read_idx(path, magic, header_ints):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    header = np.frombuffer(raw, dtype=">u4", count=header_ints)
    if header[0] != magic:
        raise ValueError(f"{path}: IDX magic {header[0]:#x}, expected {magic:#x}")
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 * header_ints)
    if data.size != int(np.prod(header[1:])):
        raise ValueError(f"{path}: {data.size} bytes of data, header says {tuple(header[1:])}")
    return data.reshape(tuple(int(d) for d in header[1:]))


def load_split(data_dir, split):
    """split 'train' or 't10k' -> (images [N,1,28,28] float32 normalised, labels [N] int64)."""
    images = _read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"), 2051, 4)
    labels = _read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"), 2049, 2)
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return (x - MEAN) / STD, torch.from_numpy(labels.astype(np.int64))


def make_optimizer(model, name, lr=None):
    return torch.optim.SGD(model.parameters(), lr=lr or DEFAULT_LR[name], momentum=MOMENTUM)


def train_epoch(model, name, opt, x, y, batch, gen, channels_last=False):
    """One shuffled pass (last partial batch kept, as DataLoader does); returns mean loss."""
    model.train()
    loss_fn = nn.CrossEntropyLoss()
    order = torch.randperm(x.shape[0], generator=gen)
    total, count = 0.0, 0
    for start in range(0, x.shape[0], batch):
        idx = order[start:start + batch]
        xb, yb = prepare_input(name, x[idx], channels_last), y[idx]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        total += loss.item() * idx.numel()
        count += idx.numel()
    return total / count


@torch.no_grad()
def accuracy(model, name, x, y, batch=1000, channels_last=False):
    model.eval()
    correct = 0
    for start in range(0, x.shape[0], batch):
        logits = model(prepare_input(name, x[start:start + batch], channels_last))
        correct += (logits.argmax(1) == y[start:start + batch]).sum().item()
    return correct / x.shape[0]
