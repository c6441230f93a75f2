#!/usr/bin/env python3
"""kill -9 under a locked store (issue 11 acceptance): a real `lathe-cli run` (mlp, 1 epoch, a
subset) is killed at random moments while another process holds 15-second exclusive locks on
the store in a loop. After each kill: PRAGMA integrity_check is ok, and every sample the run
logged to its metrics.jsonl is in the store, or is after `lathe-cli repair` (the (metric, step)
sets are compared). System python3 and its sqlite3 module only.

Usage: bench/kill_under_lock.py [--cli build/app/lathe-cli] [--kills 10] [--lock-s 15] [--seed 1]
Prints one line per kill and a summary; exits 1 when a check fails."""
import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def locker(db, hold_s, gap_s, stop):
    """Holds BEGIN EXCLUSIVE for hold_s, releases for gap_s, until stop is set."""
    while not os.path.exists(db) and not stop.is_set():
        time.sleep(0.1)
    con = sqlite3.connect(db, timeout=60, isolation_level=None)
    while not stop.is_set():
        try:
            con.execute("BEGIN EXCLUSIVE")
        except sqlite3.OperationalError:
            time.sleep(0.05)
            continue
        stop.wait(hold_s)
        con.execute("COMMIT")
        stop.wait(gap_s)
    con.close()


def jsonl_samples(path):
    """(metric, step) of every whole sample line (a line cut by the kill was never logged whole)."""
    out = set()
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if isinstance(j, dict) and "metric" in j and "step" in j:
                out.add((j["metric"], j["step"]))
    return out


def store_samples(db, run_id):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=60)
    try:
        rows = con.execute(
            "SELECT k.name, s.step FROM samples s JOIN runs r ON r.rid = s.run"
            " JOIN metric_keys k ON k.id = s.metric WHERE r.id = ?", (run_id,)).fetchall()
        status = con.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
        return set(rows), status[0] if status else None
    finally:
        con.close()


def integrity(db):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=60)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        con.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "lathe-cli"))
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--lock-s", type=float, default=15.0)
    ap.add_argument("--gap-s", type=float, default=1.0)
    ap.add_argument("--train-subset", type=int, default=8192)
    # The moment is drawn from when the run has begun logging (its metrics.jsonl exists): a run may
    # first wait out a lock and load its data, and a kill then checks nothing.
    ap.add_argument("--min-kill-s", type=float, default=0.0, help="kill no sooner than this after the first line")
    ap.add_argument("--max-kill-s", type=float, default=15.0, help="kill within this many seconds of the first line")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the store and run folders (kept anyway on a failure)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="lathe-kill-under-lock-")
    db = os.path.join(work, "lathe.db")
    runs = os.path.join(work, "runs")
    # The store exists (schema applied) before the locker starts: importing an empty folder creates
    # it (`list` only reads, and a store that is not there is an error for it).
    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    subprocess.run([args.cli, "--db", db, "import", empty], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    stop = threading.Event()
    lock_thread = threading.Thread(target=locker, args=(db, args.lock_s, args.gap_s, stop), daemon=True)
    lock_thread.start()
    failures = 0
    totals = {"kills": 0, "logged": 0, "in_store": 0, "repaired": 0, "runs": 0}
    t_start = time.time()
    for i in range(args.kills):
        before = set(os.listdir(runs)) if os.path.isdir(runs) else set()
        cmd = ["nice", args.cli, "--db", db, "run", os.path.join(ROOT, "experiments", "mlp.json"),
               "--set", "train.epochs=1", "--set", "data.train_subset=%d" % args.train_subset,
               "--set", "data.test_subset=1000", "--set", "output.dir=" + runs, "--set", "name=kill%d" % i]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        begun = time.time()
        while proc.poll() is None and time.time() - begun < 120:
            now_runs = set(os.listdir(runs)) if os.path.isdir(runs) else set()
            if any(os.path.exists(os.path.join(runs, d, "metrics.jsonl")) for d in now_runs - before):
                break
            time.sleep(0.05)
        at = rng.uniform(args.min_kill_s, args.max_kill_s)
        time.sleep(at)
        exited = proc.poll() is not None
        if not exited:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        totals["kills"] += 0 if exited else 1
        new = sorted(set(os.listdir(runs)) - before) if os.path.isdir(runs) else []
        ok = integrity(db)
        line = "kill %2d %5.2f s after the first line%s: integrity %s" % (i + 1, at, " (had exited)" if exited else "",
                                                                         ok)
        if ok != "ok":
            failures += 1
        if not new:
            print(line + "; no run folder yet (nothing logged)", flush=True)
            continue
        run_id = new[0]
        logged = jsonl_samples(os.path.join(runs, run_id, "metrics.jsonl"))
        if not logged:  # killed before its first sample (e.g. waiting for the lock to create the run)
            print(line + "; run %s: nothing logged yet" % run_id, flush=True)
            continue
        stored, status = store_samples(db, run_id)
        missing = logged - stored
        rep = subprocess.run([args.cli, "--db", db, "repair", run_id, "--wait", "120", "--json"],
                             capture_output=True, text=True)
        after, status_after = store_samples(db, run_id)
        still = logged - after
        totals["runs"] += 1
        totals["logged"] += len(logged)
        totals["in_store"] += len(logged & stored)
        totals["repaired"] += len(missing - still)
        line += "; run %s: %d samples logged, %d in the store (%s), %d re-imported by repair (%s)" % (
            run_id, len(logged), len(logged & stored), status, len(missing - still), status_after)
        if rep.returncode != 0:
            line += "; repair failed: " + (rep.stderr or rep.stdout).strip()
            failures += 1
        if still:
            line += "; STILL MISSING %d" % len(still)
            failures += 1
        print(line, flush=True)
    stop.set()
    lock_thread.join()
    final = integrity(db)
    if final != "ok":
        failures += 1
    print("summary: %d kills (%d runs with samples), %d samples logged, %d were in the store, %d re-imported"
          " by repair, %d failed checks; final integrity %s; %.0f s; work folder %s"
          % (totals["kills"], totals["runs"], totals["logged"], totals["in_store"], totals["repaired"], failures, final,
             time.time() - t_start, work))
    if failures == 0 and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
