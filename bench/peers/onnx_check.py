#!/usr/bin/env python3
# Lathe's ONNX exports against the real runtime: for each FILE.onnx, onnx.checker, then ONNX Runtime
# (CPU provider) on the Fashion-MNIST test set against Lathe's own logits for the same file
# (bench/onnx_logits, built with Lathe's benches, which also writes the exact inputs it fed, so both
# sides see the same numbers). One JSON line per file:
#   {"file", "bytes", "checker": "ok", "n", "max_abs_diff", "max_rel_diff" (|ort - lathe| over
#    max(|lathe|, 1e-3)), "rel_to_max_logit" (max |ort - lathe| over max |lathe|), "top1_agreement",
#    "lathe_accuracy", "ort_accuracy"}
#   onnx_check.py --lathe build/bench/onnx_logits FILE.onnx [FILE.onnx ...] [--data DIR]
# An INT8 QDQ file is given as QDQ.onnx@F32.onnx@model_int8.safetensors (the run's model_int8.onnx,
# model.onnx and INT8 file): ONNX Runtime runs the QDQ graph, Lathe its INT8 model rebuilt from the
# f32 file and the INT8 file's activation parameters (onnx_logits --int8), s8 weights checked
# identical to the file's ("int8_weights_identical").
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    import onnxruntime as ort
except ImportError:
    sys.exit("onnx_check.py: needs the 'onnx' and 'onnxruntime' packages (pip install onnx onnxruntime in the "
             "peers venv)")

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def test_labels(data_dir):
    path = os.path.join(data_dir, "t10k-labels-idx1-ubyte.gz")
    with gzip.open(path, "rb") as f:
        raw = f.read()
    return np.frombuffer(raw, dtype=np.uint8, offset=8).astype(np.int64)


def check(spec, lathe_bin, data_dir, labels):
    path, lathe_file, int8 = spec, spec, None
    if "@" in spec:
        path, lathe_file, int8 = spec.split("@")
    onnx.checker.check_model(onnx.load(path))
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "out")
        cmd = [lathe_bin, lathe_file, prefix, "--data", data_dir] + (["--int8", int8] if int8 else [])
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{lathe_bin} failed on {path}: {proc.stderr.strip()}")
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        n, k = info["n"], info["k"]
        lathe_logits = np.fromfile(prefix + ".logits.f32", dtype=np.float32).reshape(n, k)
        inputs = np.fromfile(prefix + ".inputs.f32", dtype=np.float32)
    opts = ort.SessionOptions()
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    shape = [n] + [d for d in inp.shape[1:]]
    x = inputs.reshape(shape)
    ort_logits = np.concatenate([sess.run(None, {inp.name: x[i:i + 500]})[0] for i in range(0, n, 500)])
    diff = np.abs(ort_logits - lathe_logits)
    lathe_top = lathe_logits.argmax(1)
    ort_top = ort_logits.argmax(1)
    return {
        "file": path,
        "bytes": os.path.getsize(path),
        "checker": "ok",
        "n": n,
        "max_abs_diff": float(diff.max()),
        "max_rel_diff": float((diff / np.maximum(np.abs(lathe_logits), 1e-3)).max()),
        "rel_to_max_logit": float(diff.max() / np.abs(lathe_logits).max()),
        "top1_agreement": float((lathe_top == ort_top).mean()),
        "lathe_accuracy": float((lathe_top == labels[:n]).mean()),
        "ort_accuracy": float((ort_top == labels[:n]).mean()),
        "lathe_backend": info["backend"],
        "lathe_int8": bool(int8),
        "int8_weights_identical": info.get("int8_weights_identical_to_file") if int8 else None,
        "onnxruntime": ort.__version__,
    }


def main():
    p = argparse.ArgumentParser(description="Run Lathe's ONNX exports in ONNX Runtime and compare with Lathe.")
    p.add_argument("files", nargs="+")
    p.add_argument("--lathe", default="build/bench/onnx_logits", help="the onnx_logits bench binary")
    p.add_argument("--data", default=DEFAULT_DATA)
    args = p.parse_args()
    labels = test_labels(args.data)
    for f in args.files:
        print(json.dumps(check(f, args.lathe, args.data, labels)), flush=True)


if __name__ == "__main__":
    main()
