#!/usr/bin/env python3
"""Simulated spot runs (issue 14 item 4): --runs supervised `lathe-cli run`s of one workload with
cost.interruptions_per_hour = lambda, cost.notice_s and cost.restart_s, each with another seed
(so other Poisson draws). Every run must finish with every interruption logged. Prints each run's
wall time and spot figures, their mean, and the expected wall time of a model of the same process:
an uninterrupted reference run gives the work W (its wall time), the set-up time S of a process
(to its first sample) and the emergency checkpoint cost C; with a notice window longer than a
step every interruption costs R + S + C and loses no step, and interruptions come only while a
child is up, so  E[T] = W / (1 - lambda (R + S + C) / (1 + lambda R)).  Daly's expected time for
the same lambda without notices (lost work since the last periodic checkpoint) is printed beside,
and engine/run/spot_model's expected time (the whole-segment sum lathe-cli cost uses) with the
15% check of the measured mean against it.
System python3 and its sqlite3 module only.

Usage: bench/spot_sim.py [--cli build/app/lathe-cli] [--runs 5] [--lambda-per-hour 60]
       [--notice-s 10] [--restart-s 5] [--model cnn] [--train-subset 20000] [--epochs 1] [--devices 1]
--devices N runs every run (the reference too) on N data-parallel ranks on this machine: the
supervisor's notice goes to rank 0, every rank stops at the same step, a restart resumes all N.
Exits 1 when a run fails, an interruption is not logged or the mean is over 15% off spot_model."""
import argparse
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def metric(db, name):
    con = sqlite3.connect(db)
    row = con.execute("SELECT s.value FROM samples s JOIN metric_keys k ON k.id = s.metric WHERE k.name = ? "
                      "ORDER BY s.step DESC LIMIT 1", (name,)).fetchone()
    return row[0] if row else None


def mean_metric(db, name):
    con = sqlite3.connect(db)
    row = con.execute("SELECT AVG(s.value) FROM samples s JOIN metric_keys k ON k.id = s.metric WHERE k.name = ?",
                      (name,)).fetchone()
    return row[0] if row and row[0] is not None else 0.0


def first_wall_s(db):
    con = sqlite3.connect(db)
    row = con.execute("SELECT MIN(wall_ms) FROM samples").fetchone()
    return (row[0] or 0) / 1000.0


def spot_model_expected(work, interval, c, r, m):
    """spot_model.cpp's expected_time (what lathe-cli cost predicts): whole segments of tau + C,
    each M e^{R/M} (e^{(tau+C)/M} - 1), and the last, shorter one with no checkpoint after it."""
    seg = lambda length: m * math.exp(r / m) * math.expm1(length / m)
    full = math.floor(work / interval)
    last = work - full * interval
    if last <= 0:
        full, last = full - 1, interval
    return full * seg(interval + c) + seg(last)


def daly_expected(work, interval, c, r, m):
    """spot_model.cpp's daly_expected_time: (W / tau) segments of M e^{R/M} (e^{(tau+C)/M} - 1)."""
    return work / interval * m * math.exp(r / m) * math.expm1((interval + c) / m)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "lathe-cli"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--lambda-per-hour", type=float, default=60)
    ap.add_argument("--notice-s", type=float, default=10)
    ap.add_argument("--restart-s", type=float, default=5)
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--train-subset", type=int, default=20000)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--every-steps", type=int, default=100)
    ap.add_argument("--instance", default="g4dn.xlarge", help="priced at its spot rate (cost/usd)")
    ap.add_argument("--devices", type=int, default=1, help="data-parallel ranks on this machine (compute.devices)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lathe-spot-sim-")
    cfg = os.path.join(tmp, "config.json")
    with open(cfg, "w") as f:
        json.dump({}, f)
    sets = ["model.zoo=" + a.model, "train.epochs=%d" % a.epochs, "train.threads=1",
            "data.train_subset=%d" % a.train_subset, "data.test_subset=1000",
            "checkpoint.every_steps=%d" % a.every_steps, "name=spot-sim", "cost.instance=" + a.instance,
            "cost.pricing=spot", "compute.devices=%d" % a.devices]

    def run(db, extra, seed):
        args = [a.cli, "--db", db, "run", cfg, "--set", "output.dir=" + os.path.join(tmp, "runs"),
                "--set", "seed=%d" % seed]
        for s in sets + extra:
            args += ["--set", s]
        t0 = time.monotonic()
        p = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        return p.returncode, time.monotonic() - t0, p.stderr

    failures = []
    try:
        ref_db = os.path.join(tmp, "ref.db")
        code, work, err = run(ref_db, [], 1)
        if code != 0:
            print("reference run failed: " + err)
            return 1
        setup_s = first_wall_s(ref_db)
        c = mean_metric(ref_db, "ckpt/write_s")
        steps = sqlite3.connect(ref_db).execute("SELECT MAX(step) FROM samples").fetchone()[0] or 1
        lam = a.lambda_per_hour / 3600.0
        r = a.restart_s
        model = work / (1 - lam * (r + setup_s + c) / (1 + lam * r))
        step_s = work / max(steps, 1)
        tau = a.every_steps * step_s
        daly = daly_expected(work, tau, c, r + setup_s, 1 / lam)
        predicted = spot_model_expected(work, tau, c, r + setup_s, 1 / lam)
        print("reference: W %.1f s wall (%d steps), set-up S %.2f s, checkpoint C %.3f s" % (work, steps, setup_s, c))
        walls, setups, restarts = [], 0.0, 0
        for i in range(a.runs):
            db = os.path.join(tmp, "spot%d.db" % i)
            code, wall, err = run(db, ["cost.interruptions_per_hour=%g" % a.lambda_per_hour,
                                       "cost.notice_s=%g" % a.notice_s, "cost.restart_s=%g" % a.restart_s], 100 + i)
            con = sqlite3.connect(db)
            status = con.execute("SELECT status FROM runs").fetchone()[0]
            n = metric(db, "spot/interruptions")
            events = con.execute("SELECT COUNT(*) FROM events WHERE kind = 'spot/interruption'").fetchone()[0]
            if code != 0 or status != "finished":
                failures.append("run %d: exit %d, status %s: %s" % (i, code, status, err.strip()[-300:]))
            if n is None or events != n:
                failures.append("run %d: %s interruptions, %d logged" % (i, n, events))
            walls.append(wall)
            setups += metric(db, "spot/restart_setup_s") or 0
            restarts += int(metric(db, "spot/restarts") or 0)
            print("run %d: %.1f s wall, %d interruptions (%d killed), %d steps redone, %.1f s waiting, "
                  "cost/usd_on_demand %.6f, cost/usd %.6f" % (
                      i, wall, n or 0, metric(db, "spot/kills") or 0, metric(db, "spot/steps_redone") or 0,
                      metric(db, "spot/restart_wait_s") or 0, metric(db, "cost/usd_on_demand") or 0,
                      metric(db, "cost/usd") or 0))
        mean = sum(walls) / len(walls)
        # A restarted process's set-up as measured in these runs (exec, store, repair, data, model).
        s_restart = setups / restarts if restarts else setup_s
        model2 = work / (1 - lam * (r + s_restart + c) / (1 + lam * r))
        print("summary: mean wall %.1f s over %d runs, %d interruptions; model E[T] %.1f s (%+.1f%%) with the "
              "reference's set-up %.2f s, %.1f s (%+.1f%%) with the restarts' measured set-up %.2f s; Daly "
              "without notices %.1f s (tau %.1f s)" % (mean, len(walls), restarts, model, 100 * (mean / model - 1),
                                                      setup_s, model2, 100 * (mean / model2 - 1), s_restart, daly,
                                                      tau))
        # engine/run/spot_model's prediction of the same runs (checkpoint every tau, the work since
        # the last one lost at each interruption, R + S per restart): the acceptance wants the
        # measured mean within 15% of it.
        off = mean / predicted - 1
        print("spot_model: E[T] %.1f s at tau %.1f s, C %.3f s, R + S %.2f s, M %.0f s; measured mean %+.1f%%: %s" % (
            predicted, tau, c, r + setup_s, 1 / lam, 100 * off, "within 15%" if abs(off) <= 0.15 else "OFF"))
        if abs(off) > 0.15:
            failures.append("mean wall %.1f s is %+.1f%% from spot_model's %.1f s (allowed 15%%)" % (
                mean, 100 * off, predicted))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAILED: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
