#!/usr/bin/env python3
"""The scaling model (issue 15, item 10; engine/dist/scaling_model.h) checked against measurements
on this machine. Per model and round:
  1. the link: Gloo's f32 all-reduce bus bandwidth over loopback, from build/bench/allreduce, at the
     size nearest the model's gradient bytes (log-interpolated between its rows);
  2. one rank x 1 thread at batch 64, the per-rank work of the 2-rank run, recorded by lathe-cli;
  3. `lathe-cli scaling RUN --bus-gbps B --hidden 0 --ranks 2`: the 2-rank throughput projected from
     that 1-rank run alone (a 1-rank run measures no overlap, so none is assumed);
  4. two ranks x 1 thread at batch 64, measured; its own `scaling` (overlap fitted) projects 4, 8.
The error printed is projected / measured - 1 for the 2-rank samples/s (medians over rounds); each
run's samples/s and dist/comm_s are its steady values as `scaling` reports them (the median of its
samples after the first logging interval).
Measured on this machine's CPU ranks; the projections are labelled as such.
System python3 only.

Usage: bench/scaling_check.py [--cli build/app/lathe-cli] [--allreduce build/bench/allreduce]
       [--models cnn,mlp] [--rounds 3] [--train-subset 12800]"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bus_bandwidth_curve(binary):
    """[(bytes, busbw GB/s)] of the f32 blocking all-reduce rows."""
    out = subprocess.run([binary], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 7 and f[1] == "f32" and f[0].isdigit():
            rows.append((int(f[0]), float(f[5])))
    if not rows:
        raise SystemExit(f"{binary} printed no f32 rows:\n{out}")
    return sorted(rows)


def bus_at(curve, nbytes):
    """Log-interpolated bus bandwidth at nbytes (clamped to the measured sizes)."""
    if nbytes <= curve[0][0]:
        return curve[0][1]
    for (b0, w0), (b1, w1) in zip(curve, curve[1:]):
        if nbytes <= b1:
            t = (math.log(nbytes) - math.log(b0)) / (math.log(b1) - math.log(b0))
            return w0 + t * (w1 - w0)
    return curve[-1][1]


def run(cli, db, work, model, subset, devices):
    out = tempfile.mkdtemp(dir=work)
    cmd = [cli, "--db", db, "run", os.path.join(ROOT, "experiments", model + ".json"), "--json",
           "--set", "train.epochs=1", "--set", f"data.train_subset={subset}", "--set", "data.test_subset=500",
           "--set", f"output.dir={out}", "--set", f"compute.devices={devices}", "--set", "train.batch_size=64",
           "--set", "train.threads=1", "--set", "train.schedule.type=constant"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    finished = json.loads(r.stdout.strip().splitlines()[-1])
    return finished["run_id"], finished["metrics"]


def scaling(cli, db, run_id, bus_gbps, extra):
    cmd = [cli, "--db", db, "scaling", run_id, "--bus-gbps", f"{bus_gbps:.6f}", "--json"] + extra
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build/app/lathe-cli"))
    ap.add_argument("--allreduce", default=os.path.join(ROOT, "build/bench/allreduce"))
    ap.add_argument("--models", default="cnn,mlp")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--train-subset", type=int, default=12800)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="lathe-scaling-")
    db = os.path.join(work, "bench.db")
    try:
        for model in a.models.split(","):
            projected, measured, fitted, ahead = [], [], [], None
            for rnd in range(a.rounds):
                curve = bus_bandwidth_curve(a.allreduce)
                one, m1 = run(a.cli, db, work, model, a.train_subset, 1)
                grad_bytes = 4 * m1["model/params"]
                bw = bus_at(curve, grad_bytes)
                s1 = scaling(a.cli, db, one, bw, ["--hidden", "0", "--ranks", "2"])
                p = s1["points"][0]["samples_per_s"]
                two, m2 = run(a.cli, db, work, model, a.train_subset, 2)
                s2 = scaling(a.cli, db, two, bw, ["--ranks", "2,4,8"])
                # Both sides are the runs' steady values (medians after the first logging interval,
                # what `scaling` projects from), not their last samples.
                m = s2["samples_per_s"]
                projected.append(p)
                measured.append(m)
                fitted.append(s2["hidden_fraction"])
                ahead = s2
                print(f"{model} round {rnd + 1}: link {bw:.3f} GB/s at {grad_bytes:.0f} B; 1x1 thread "
                      f"{s1['samples_per_s']:.0f} samples/s -> projected 2 ranks {p:.0f}, measured "
                      f"{m:.0f} ({p / m - 1:+.1%}); "
                      f"2-rank dist/comm_s {s2['comm_s'] * 1e3:.2f} ms, "
                      f"fitted hidden {s2['hidden_fraction']:.2f}", flush=True)
            pm, mm = statistics.median(projected), statistics.median(measured)
            print(f"{model}: median projected 2-rank samples/s {pm:.0f} vs measured {mm:.0f}: error {pm / mm - 1:+.1%}; "
                  f"hidden share fitted from the 2-rank runs {statistics.median(fitted):.2f}")
            print(f"{model}: projection from the last 2-rank run: " +
                  ", ".join(f"{q['ranks']} ranks {q['samples_per_s']:.0f} samples/s ({q['efficiency']:.0%})"
                            for q in ahead["points"]) + " (projected, same link)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
