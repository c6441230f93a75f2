#!/usr/bin/env python3
"""Data-parallel overhead on one machine (issue 15): the same global batch trained by 2 ranks x 1
thread (`compute.devices=2`, batch 64 per rank) and by 1 rank x 2 threads (batch 128), in
interleaved rounds so that drifting machine load hits both alike. Each run's throughput is the
median of its train/samples_per_s points after the first (warm-up) one; the ratio 2-rank / 1-rank is
the median over rounds. The 1-rank figure of a round is the better of two runs, one under the
bounded OpenMP spin that lathe-cli sets (GOMP_SPINCOUNT=30000) and one under libgomp's default. Also printed: the
2-rank run's dist/comm_fraction and dist/bytes_per_step. Each round also runs the 2 ranks with
compute.grad_compression=fp16 (through shared memory too, in 16 bits; its samples/s against the f32
2-rank run's and its bytes, exactly half, are printed) and with
LATHE_DIST_SHM=0, so their gradients take Gloo's loopback tcp instead of shared memory (the ratio
of that run is printed beside). Targets (issue 15): >= 0.90 on the cnn, >= 0.85 on the mlp, for the
default (shared-memory) path. With --shard-optimizer each round also runs the 2 ranks with ZeRO-1
(compute.shard_optimizer=true) and prints its throughput against the plain 2-rank run and each
rank's dist/rank<i>/optimizer_bytes against the unsharded mem/optimizer_bytes.
Beside samples/s, each run's CPU time per step: the CPU the run's processes spent in its logging
windows after the first (all ranks: dist/rank<i>/util x threads, or one rank's device/util x cores,
times the window's wall time), divided by the window's steps, median over windows; on a machine
that other work shares, this moves less than samples/s does.
Measured on this machine's CPU; no projection.
System python3 and its json module only.

Usage: bench/dist_overhead.py [--cli build/app/lathe-cli] [--rounds 3] [--models cnn,mlp]
       [--train-subset 12800] [--shard-optimizer] [--check]
--check exits 1 when a ratio is under its target or fp16 does not halve the bytes."""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = {"cnn": 0.90, "mlp": 0.85}


def metrics_of(out_dir):
    """name -> [values] from the one run folder under out_dir (rank 0's); name + "@" -> [(step,
    wall_ms, value)]."""
    runs = [d for d in glob.glob(os.path.join(out_dir, "*")) if os.path.isdir(d) and not d.endswith(".ranks")]
    if len(runs) != 1:
        raise SystemExit(f"expected one run folder in {out_dir}, found {runs}")
    values = {}
    with open(os.path.join(runs[0], "metrics.jsonl")) as f:
        for line in f:
            j = json.loads(line)
            if "metric" in j and isinstance(j.get("value"), (int, float)):
                values.setdefault(j["metric"], []).append(j["value"])
                values.setdefault(j["metric"] + "@", []).append((j.get("step"), j.get("wall_ms"), j["value"]))
    return values


def cpu_ms_per_step(m, devices):
    """Median over the logging windows after the first of the run's CPU milliseconds per step (all
    ranks), from the busy shares: a rank's dist/rank<i>/util is of its own train.threads, one rank's
    device/util of all the cores it may use. None when the run logged neither."""
    threads = 2 // devices
    if devices > 1:
        shares = [m.get(f"dist/rank{r}/util@") for r in range(devices)]
        if any(s is None for s in shares):
            return None
        points = [(p[0], p[1], sum(s[i][2] for s in shares) * threads) for i, p in enumerate(shares[0])]
    else:
        if "device/util@" not in m:
            return None
        cores = len(os.sched_getaffinity(0))
        points = [(st, ms, v * cores) for st, ms, v in m["device/util@"]]
    per_step = [busy * (ms - ms0) / (st - st0) for (st0, ms0, _), (st, ms, busy) in zip(points, points[1:])
                if st > st0 and ms is not None and ms0 is not None]
    per_step = per_step[1:] or per_step
    return statistics.median(per_step) if per_step else None


def run(cli, work, model, subset, devices, extra=(), tcp=False, spin=False):
    out = tempfile.mkdtemp(dir=work)
    cmd = [cli, "--db", os.path.join(work, "bench.db"), "run", os.path.join(ROOT, "experiments", model + ".json"),
           "--set", "train.epochs=1", "--set", f"data.train_subset={subset}", "--set", "data.test_subset=500",
           "--set", f"output.dir={out}", "--set", f"compute.devices={devices}",
           "--set", f"train.batch_size={128 // devices}", "--set", f"train.threads={2 // devices}",
           "--set", "train.schedule.type=constant"]
    for e in extra:
        cmd += ["--set", e]
    env = dict(os.environ)
    if tcp:
        env["LATHE_DIST_SHM"] = "0"
    if spin:  # libgomp's own default instead of the bounded spin lathe-cli sets (app/cli_openmp.h)
        env.pop("OMP_WAIT_POLICY", None)
        env["GOMP_SPINCOUNT"] = "300000"
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    m = metrics_of(out)
    sps = m["train/samples_per_s"][1:] or m["train/samples_per_s"]
    m["cpu_ms_per_step"] = cpu_ms_per_step(m, devices)
    return statistics.median(sps), m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "lathe-cli"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default="cnn,mlp")
    ap.add_argument("--train-subset", type=int, default=12800)
    ap.add_argument("--shard-optimizer", action="store_true", help="also time ZeRO-1 on 2 ranks")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="lathe-dist-bench-")
    failed = []
    try:
        for model in a.models.split(","):
            ratios, tcp_ratios, one_sps, two_sps, fractions, zero_ratios = [], [], [], [], [], []
            fp16_ratios, cpu1, cpu2 = [], [], []
            bytes32 = bytes16 = None
            for rnd in range(a.rounds):
                # The 1-rank baseline at its best: under lathe-cli's bounded OpenMP spin and under
                # libgomp's default (2 threads; the 2 ranks have 1 thread each, no barriers).
                one = [run(a.cli, work, model, a.train_subset, 1), run(a.cli, work, model, a.train_subset, 1, spin=True)]
                s1, m1 = max(one, key=lambda r: r[0])
                s2, m2 = run(a.cli, work, model, a.train_subset, 2)
                if m1["cpu_ms_per_step"] is not None and m2["cpu_ms_per_step"] is not None:
                    cpu1.append(m1["cpu_ms_per_step"])
                    cpu2.append(m2["cpu_ms_per_step"])
                st, _ = run(a.cli, work, model, a.train_subset, 2, tcp=True)
                s16, m16 = run(a.cli, work, model, a.train_subset, 2, ["compute.grad_compression=fp16"])
                fp16_ratios.append(s16 / s2)
                bytes16 = m16["dist/bytes_per_step"][-1]
                one_sps.append(s1)
                two_sps.append(s2)
                ratios.append(s2 / s1)
                tcp_ratios.append(st / s1)
                fractions.append(statistics.median(m2["dist/comm_fraction"]))
                bytes32 = m2["dist/bytes_per_step"][-1]
                print(f"{model} round {rnd + 1}: 1x2 threads {s1:.0f} samples/s, 2x1 thread {s2:.0f} samples/s "
                      f"(tcp {st:.0f}, fp16 {s16:.0f}), ratio {s2 / s1:.3f} (tcp {st / s1:.3f}), "
                      f"comm_fraction {fractions[-1]:.3f}" +
                      (f", CPU {cpu1[-1]:.2f} / {cpu2[-1]:.2f} ms per step (1 / 2 ranks)" if len(cpu2) == rnd + 1 else ""),
                      flush=True)
                if a.shard_optimizer:
                    sz, mz = run(a.cli, work, model, a.train_subset, 2, ["compute.shard_optimizer=true"])
                    zero_ratios.append(sz / s2)
                    per_rank = [mz[f"dist/rank{r}/optimizer_bytes"][-1] for r in range(2)
                                if f"dist/rank{r}/optimizer_bytes" in mz]
                    print(f"{model} round {rnd + 1}: ZeRO-1 2x1 thread {sz:.0f} samples/s ({sz / s2:.3f}x plain); "
                          f"optimizer bytes per rank {', '.join(f'{b:.0f}' for b in per_rank)} of "
                          f"{m2['mem/optimizer_bytes'][-1]:.0f} unsharded", flush=True)
            ratio = statistics.median(ratios)
            ok = ratio >= TARGET[model]
            print(f"{model}: median 1 rank x 2 threads {statistics.median(one_sps):.0f} samples/s, 2 ranks x 1 thread "
                  f"{statistics.median(two_sps):.0f} samples/s: ratio {ratio:.3f} (target >= {TARGET[model]:.2f}: "
                  f"{'met' if ok else 'NOT met'}; loopback tcp {statistics.median(tcp_ratios):.3f}); dist/comm_fraction {statistics.median(fractions):.3f}; "
                  f"dist/bytes_per_step f32 {bytes32:.0f}, fp16 {bytes16:.0f} ({bytes16 / bytes32:.3f}x); fp16 2-rank "
                  f"samples/s {statistics.median(fp16_ratios):.3f}x the f32 2-rank run's (median over rounds)" +
                  (f"; CPU per step 1 rank x 2 threads {statistics.median(cpu1):.2f} ms, 2 ranks x 1 thread "
                   f"{statistics.median(cpu2):.2f} ms" if cpu2 else ""))
            if zero_ratios:
                print(f"{model}: ZeRO-1 on 2 ranks at {statistics.median(zero_ratios):.3f}x the plain 2-rank samples/s "
                      f"(median over rounds)")
            if not ok:
                failed.append(f"{model} ratio {ratio:.3f}")
            if bytes16 * 2 != bytes32:
                failed.append(f"{model} fp16 bytes {bytes16} are not half of {bytes32}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failed and a.check:
        print("FAILED: " + "; ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
