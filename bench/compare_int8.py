#!/usr/bin/env python3
# Lathe INT8 vs PyTorch INT8 (eager static PTQ, x86/fbgemm) on the cnn, measured alternately in one
# run: bench/int8_cnn (Lathe f32 and INT8) and bench/peers/torch_quant_cnn.py (PyTorch f32 and INT8)
# take turns --rounds times on the same trained weights; the medians of each and the ratios are
# printed as one JSON object. Measured numbers, on this machine, at the moment of the run.
#   compare_int8.py --lathe-bench build/bench/int8_cnn --python /tmp/peers-venv/bin/python \
#                   --weights runs/<id>/model.safetensors [--rounds 3]
import argparse
import json
import os
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def run_json(cmd, cwd=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=cwd).stdout
    return json.loads(out[out.index("{"):])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lathe-bench", required=True)
    p.add_argument("--python", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    lathe, torch = [], []
    for _ in range(a.rounds):
        lathe.append(run_json([a.lathe_bench, "--weights", a.weights, "--reps", "20"]))
        torch.append(run_json([a.python, "torch_quant_cnn.py", "--weights", a.weights], cwd=os.path.join(HERE, "peers")))
    res = {"what": "cnn inference images/s, medians over alternating rounds", "rounds": a.rounds,
           "device": lathe[0]["device"], "cpu_isa": lathe[0]["cpu_isa"], "lathe_weight_bits": lathe[0]["weight_bits"],
           "torch": torch[0]["torch"], "torch_engine": torch[0]["engine"],
           "accuracy": {"lathe_f32": lathe[0].get("f32_test_accuracy"), "lathe_int8": lathe[0].get("int8_test_accuracy"),
                        "torch_f32": torch[0].get("f32_test_accuracy"), "torch_int8": torch[0].get("int8_test_accuracy")}}
    for b in ("batch_1", "batch_256"):
        m = lambda runs, k: statistics.median(r[b][k] for r in runs)
        row = {"lathe_f32": m(lathe, "f32_samples_per_s"), "lathe_int8": m(lathe, "int8_samples_per_s"),
               "torch_f32": m(torch, "f32_samples_per_s"), "torch_int8": m(torch, "int8_samples_per_s")}
        row["lathe_int8_over_lathe_f32"] = row["lathe_int8"] / row["lathe_f32"]
        row["lathe_int8_over_torch_int8"] = row["lathe_int8"] / row["torch_int8"]
        res[b] = row
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
