#!/usr/bin/env python3
"""Training throughput, Lathe vs PyTorch, measured side by side in one invocation.

Runs bench/train_throughput (Lathe, CPU backend) and bench/peers/torch_train.py (PyTorch, same models,
batch, optimizer, threads and protocol) alternately, `--rounds` times each, for every precision in
`--precisions`: f32 against PyTorch f32, and bf16 (Lathe's bf16 compute precision, f32 master weights)
against PyTorch's bf16 autocast. Prints a table of the median samples/s of each, their ratio, and
Lathe's MFU against the peak of the data type its matmuls run at (f32 SGEMM or bf16 matmul, measured
in the same run or the best recorded on this CPU; never above 1), then one JSON line.

  python3 bench/compare_training.py [--build build] [--python PY] [--models mlp,cnn]
                                    [--precisions f32,bf16] [--rounds 2]

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


def machine_busy():
    """(busy, total) jiffies of all CPUs from /proc/stat, or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v) - v[3] - v[4], sum(v)
    except (OSError, ValueError, IndexError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=None, help="python with torch (default: bench/peers/setup-venv.sh)")
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--precisions", default="f32,bf16", help="f32 and/or bf16 (PyTorch: bf16 autocast)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = ap.parse_args()
    precisions = args.precisions.split(",")
    for p in precisions:
        if p not in ("f32", "bf16"):
            sys.exit(f"--precisions: unknown precision '{p}' (allowed: f32, bf16)")

    py = args.python
    if py is None:
        setup = subprocess.run(["bash", os.path.join(HERE, "peers", "setup-venv.sh")], check=True,
                               capture_output=True, text=True)
        py = setup.stdout.strip().splitlines()[-1]
    lathe_bin = os.path.join(args.build, "bench", "train_throughput")
    if not os.path.exists(lathe_bin):
        sys.exit(f"{lathe_bin} not found: build first (scripts/build.sh)")

    models = args.models.split(",")
    cases = [(m, p) for m in models for p in precisions]
    lathe = {c: [] for c in cases}
    torch = {c: [] for c in cases}
    info = {}
    busy0 = machine_busy()
    for r in range(args.rounds):
        for m, p in cases:
            for row in run_json([lathe_bin, "--models", m, "--steps", str(args.steps), "--threads", str(args.threads),
                                 "--precision", p]):
                lathe[(m, p)].append(row)
            for row in run_json([py, os.path.join(HERE, "peers", "torch_train.py"), "--mode", "throughput",
                                 "--model", m, "--steps", str(args.steps), "--threads", str(args.threads),
                                 "--autocast", "bf16" if p == "bf16" else "off"]):
                torch[(m, p)].append(row)
                info["torch"] = row.get("torch")
            print(f"round {r + 1}/{args.rounds} {m} {p}: lathe {lathe[(m, p)][-1]['samples_per_s']:.0f}/s, "
                  f"pytorch {torch[(m, p)][-1]['samples_per_s']:.0f}/s", file=sys.stderr)
    busy1 = machine_busy()
    # The whole machine's busy share over the comparison (this script's children included: 1.0 =
    # every core busy; above what the benchmark alone uses means other work shared the cores).
    load = (busy1[0] - busy0[0]) / max(busy1[1] - busy0[1], 1) if busy0 and busy1 else None

    device = lathe[cases[0]][0]["device"]
    print(f"\nTraining throughput, batch 128, {args.threads} threads, on {device} (CPU)")
    print(f"PyTorch {info.get('torch')} from PyPI (bf16: torch.autocast('cpu', bfloat16)); medians of "
          f"{args.rounds} alternating rounds, each the median of 3 timed repeats of {args.steps} steps")
    if load is not None:
        print(f"Machine busy share over the comparison (all processes): {100 * load:.0f}%")
    print("Lathe MFU is against the peak of the precision's data type (see peak_how in the JSON)\n")
    print("| model | precision | Lathe samples/s | PyTorch samples/s | ratio | Lathe MFU | Lathe GFLOP/s |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    peaks = {}
    for m, p in cases:
        ls = statistics.median(r["samples_per_s"] for r in lathe[(m, p)])
        ts = statistics.median(r["samples_per_s"] for r in torch[(m, p)])
        mfu = statistics.median(r["mfu"] for r in lathe[(m, p)])
        gf = statistics.median(r["train_gflop_per_s"] for r in lathe[(m, p)])
        peaks[p] = {"gflop_per_s": max(r["peak_gflop_per_s"] for r in lathe[(m, p)]),
                    "how": lathe[(m, p)][-1].get("peak_how")}
        cl = torch[(m, p)][-1].get("channels_last")
        note = f" (channels_last={cl})" if cl is not None and m in ("cnn", "teacher") else ""
        torch_label = "autocast bf16" if p == "bf16" else "f32"
        # bf16 without native kernels here (no AVX-512 bf16): Lathe rounds to bf16, computes in f32.
        emulated = lathe[(m, p)][-1].get("matmuls", "native") != "native"
        lp = f"{p} (emulated)" if emulated else p
        print(f"| {m} | {lp} | {ls:,.0f} | {ts:,.0f} ({torch_label}){note} | {ls / ts:.2f}x | {100 * mfu:.1f}% | "
              f"{gf:.1f} |")
        key = m if p == "f32" else f"{m}_{p}"
        summary[key] = {"model": m, "precision": p, "lathe": ls, "pytorch": ts, "ratio": ls / ts, "mfu": mfu,
                        "lathe_matmuls": lathe[(m, p)][-1].get("matmuls", "native"),
                        "lathe_runs": [r["samples_per_s"] for r in lathe[(m, p)]],
                        "pytorch_runs": [r["samples_per_s"] for r in torch[(m, p)]]}
    print(json.dumps({"compare_training": summary, "device": device, "torch": info.get("torch"),
                      "threads": args.threads, "rounds": args.rounds, "machine_busy_share": load, "peaks": peaks}))


if __name__ == "__main__":
    main()
