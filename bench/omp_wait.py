#!/usr/bin/env python3
"""How OpenMP threads wait, quiet and on a busy machine: `lathe-cli run` of the cnn and the mlp on
1 rank x 2 threads (batch 128, one short epoch) with libgomp's own default (GOMP_SPINCOUNT=300000,
OMP_WAIT_POLICY unset: spin, then sleep) against OMP_WAIT_POLICY=passive (sleep at once; what
lathe-cli sets when neither variable is set, app/cli_openmp.h), in interleaved rounds; then the same
with --busy N processes spinning on the CPU beside it (a laptop compiling in the background).
Throughput = the median of the run's train/samples_per_s points after the first; the figure per
setting is the median over rounds, and the ratio is passive / default. Measured on this machine's
CPU, no projection. System python3 only.

Usage: bench/omp_wait.py [--cli build/app/lathe-cli] [--rounds 3] [--models cnn,mlp] [--busy 2]
       [--train-subset 6400]"""
import argparse
import glob
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = {"default": {"GOMP_SPINCOUNT": "300000"}, "passive": {"OMP_WAIT_POLICY": "passive"}}


def samples_per_s(cli, work, model, subset, policy):
    out = tempfile.mkdtemp(dir=work)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(POLICIES[policy])
    cmd = [cli, "--db", os.path.join(work, "bench.db"), "run", os.path.join(ROOT, "experiments", model + ".json"),
           "--set", "train.epochs=1", "--set", f"data.train_subset={subset}", "--set", "data.test_subset=100",
           "--set", f"output.dir={out}", "--set", "train.batch_size=128", "--set", "train.threads=2",
           "--set", "train.schedule.type=constant"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    runs = [d for d in glob.glob(os.path.join(out, "*")) if os.path.isdir(d)]
    sps = []
    with open(os.path.join(runs[0], "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if j.get("metric") == "train/samples_per_s":
                sps.append(j["value"])
    shutil.rmtree(out, ignore_errors=True)
    return statistics.median(sps[1:] or sps)


def spin():
    while True:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "lathe-cli"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default="cnn,mlp")
    ap.add_argument("--busy", type=int, default=2, help="spinning processes for the busy-machine rows")
    ap.add_argument("--train-subset", type=int, default=6400)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="lathe-omp-bench-")
    try:
        for busy in (0, a.busy):
            spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(busy)]
            for p in spinners:
                p.start()
            try:
                for model in a.models.split(","):
                    got = {p: [] for p in POLICIES}
                    for _ in range(a.rounds):
                        for policy in POLICIES:
                            got[policy].append(samples_per_s(a.cli, work, model, a.train_subset, policy))
                    d, p = statistics.median(got["default"]), statistics.median(got["passive"])
                    print(f"{model}, {busy} busy processes: libgomp default {d:.0f} samples/s, passive {p:.0f} "
                          f"samples/s: passive / default {p / d:.3f} (rounds {a.rounds}; 1 rank x 2 threads)",
                          flush=True)
            finally:
                for p in spinners:
                    p.terminate()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
