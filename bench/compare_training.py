#!/usr/bin/env python3
"""Training throughput, Lathe vs PyTorch, measured side by side in one invocation.

Runs bench/train_throughput (Lathe, CPU backend) and bench/peers/torch_train.py (PyTorch, same models,
batch, optimizer and protocol) alternately, `--rounds` times each, and prints a table of the median
samples/s of each, their ratio, and Lathe's MFU (against the SGEMM peak it measured in the same run).

  python3 bench/compare_training.py [--build build] [--python PY] [--models mlp,cnn] [--rounds 2]

--python defaults to the venv made by bench/peers/setup-venv.sh (created on first use).
Standard library only, so it runs with the system python3.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=None, help="python with torch (default: bench/peers/setup-venv.sh)")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = ap.parse_args()

    py = args.python
    if py is None:
        setup = subprocess.run(["bash", os.path.join(HERE, "peers", "setup-venv.sh")], check=True,
                               capture_output=True, text=True)
        py = setup.stdout.strip().splitlines()[-1]
    lathe_bin = os.path.join(args.build, "bench", "train_throughput")
    if not os.path.exists(lathe_bin):
        sys.exit(f"{lathe_bin} not found: build first (scripts/build.sh)")

    models = args.models.split(",")
    lathe = {m: [] for m in models}
    torch = {m: [] for m in models}
    info = {}
    for r in range(args.rounds):
        for m in models:
            for row in run_json([lathe_bin, "--models", m, "--steps", str(args.steps), "--threads", str(args.threads)]):
                lathe[m].append(row)
            for row in run_json([py, os.path.join(HERE, "peers", "torch_train.py"), "--mode", "throughput",
                                 "--model", m, "--steps", str(args.steps), "--threads", str(args.threads)]):
                torch[m].append(row)
                info["torch"] = row.get("torch")
            print(f"round {r + 1}/{args.rounds} {m}: lathe {lathe[m][-1]['samples_per_s']:.0f}/s, "
                  f"pytorch {torch[m][-1]['samples_per_s']:.0f}/s", file=sys.stderr)

    device = lathe[models[0]][0]["device"]
    peak = statistics.median(row["peak_gflop_per_s"] for m in models for row in lathe[m])
    print(f"\nTraining throughput, batch 128, f32, {args.threads} threads, on {device} (CPU)")
    print(f"PyTorch {info.get('torch')} from PyPI; medians of {args.rounds} alternating rounds, "
          f"each the median of 3 timed repeats of {args.steps} steps")
    print(f"Lathe MFU is against the f32 SGEMM peak measured in the same run: {peak:.0f} GFLOP/s\n")
    print(f"| model | Lathe samples/s | PyTorch samples/s | ratio | Lathe MFU | Lathe GFLOP/s |")
    print(f"|---|---|---|---|---|---|")
    summary = {}
    for m in models:
        ls = statistics.median(r["samples_per_s"] for r in lathe[m])
        ts = statistics.median(r["samples_per_s"] for r in torch[m])
        mfu = statistics.median(r["mfu"] for r in lathe[m])
        gf = statistics.median(r["train_gflop_per_s"] for r in lathe[m])
        cl = torch[m][-1].get("channels_last")
        note = f" (channels_last={cl})" if cl is not None and m in ("cnn", "teacher") else ""
        print(f"| {m} | {ls:,.0f} | {ts:,.0f}{note} | {ls / ts:.2f}x | {100 * mfu:.1f}% | {gf:.1f} |")
        summary[m] = {"lathe": ls, "pytorch": ts, "ratio": ls / ts, "mfu": mfu}
    print(json.dumps({"compare_training": summary, "device": device, "torch": info.get("torch")}))


if __name__ == "__main__":
    main()
