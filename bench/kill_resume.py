#!/usr/bin/env python3
"""kill -9 and resume (issue 14 acceptance): a real `lathe-cli run` (1 thread, fixed seed,
checkpoint.every_steps) is killed with SIGKILL at --kills random steps, each time continued with
`lathe-cli resume RUN`, until it finishes. Then its final weights must equal an uninterrupted
run's bit for bit, its final test metrics too, the store must pass PRAGMA integrity_check, hold no
duplicate (metric, step) sample, one `resumed` event per kill, and status finished. Per kill it
prints the step reached (the last sample the killed process printed), the checkpoint step it
resumed from and the steps redone (reached - resumed; at most every_steps - 1 plus the logging
granularity). System python3 and its sqlite3 module only.

Usage: bench/kill_resume.py [--cli build/app/lathe-cli] [--kills 20] [--model cnn] [--every-steps 50]
       [--train-subset 4096] [--epochs 2] [--batch-size 32] [--seed 1]
Exits 1 when a check fails."""
import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tensors(path):
    """name -> (dtype, shape, raw bytes) of a safetensors file, metadata left out."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: (v["dtype"], tuple(v["shape"]), data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


def start(cli, args):
    return subprocess.Popen([cli] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def reached_since(jsonl, offset):
    """The last train/* step in metrics.jsonl after byte `offset`: where the killed process was
    (the file is written line by line; the --json stream on a pipe is block-buffered)."""
    last = -1
    if not os.path.exists(jsonl):
        return last
    with open(jsonl) as f:
        f.seek(offset)
        for line in f:
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if isinstance(j, dict) and str(j.get("metric", "")).startswith("train/"):
                last = max(last, j.get("step", -1))
    return last


def size(path):
    return os.path.getsize(path) if os.path.exists(path) else 0


def run_until(proc, kill_at_step):
    """Reads the --json stream; SIGKILLs the process once a sample at step >= kill_at_step appears
    (None: let it finish). Returns (exit code, last step seen, started event or None)."""
    last, started = -1, None
    for line in proc.stdout:
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("event") == "started":
            started = j
        if "metric" in j and isinstance(j.get("step"), int):
            last = max(last, j["step"]) if j["metric"].startswith("train/") else last
            if kill_at_step is not None and last >= kill_at_step:
                proc.send_signal(signal.SIGKILL)
                break
    proc.wait()
    proc.stderr.read()
    return proc.returncode, last, started


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "lathe-cli"))
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--every-steps", type=int, default=50)
    ap.add_argument("--train-subset", type=int, default=4096)
    ap.add_argument("--test-subset", type=int, default=500)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tmp = tempfile.mkdtemp(prefix="lathe-kill-resume-")
    sets = ["model.zoo=" + a.model, "train.epochs=%d" % a.epochs, "train.batch_size=%d" % a.batch_size,
            "train.threads=1", "seed=7", "data.train_subset=%d" % a.train_subset,
            "data.test_subset=%d" % a.test_subset, "checkpoint.every_steps=%d" % a.every_steps,
            "checkpoint.keep=2", "name=kill-resume"]
    cfg = os.path.join(tmp, "config.json")
    with open(cfg, "w") as f:
        json.dump({}, f)
    failures = []
    try:
        def run_args(db, out):
            args = ["--db", db, "run", cfg, "--json", "--set", "output.dir=" + out]
            for s in sets:
                args += ["--set", s]
            return args

        # The uninterrupted reference.
        ref_db, ref_out = os.path.join(tmp, "ref.db"), os.path.join(tmp, "ref-runs")
        code, total, ref_started = run_until(start(a.cli, run_args(ref_db, ref_out)), None)
        if code != 0 or not ref_started:
            print("reference run failed (exit %d)" % code)
            return 1
        ref_weights = tensors(os.path.join(ref_started["run_dir"], "model.safetensors"))
        print("reference: %d steps, %d tensors" % (total, len(ref_weights)))

        # The killed run: every kill at a random later step, then resume until it finishes.
        db, out = os.path.join(tmp, "kill.db"), os.path.join(tmp, "kill-runs")
        targets = sorted(rng.sample(range(1, total), min(a.kills, total - 1)))
        proc = start(a.cli, run_args(db, out))
        run_id, run_dir, redone, kills, offset = None, None, [], 0, 0
        for target in targets + [None]:
            code, _, started = run_until(proc, target)
            if started:
                run_id, run_dir = started["run_id"], started["run_dir"]
            jsonl = os.path.join(run_dir, "metrics.jsonl")
            reached = reached_since(jsonl, offset)
            offset = size(jsonl)
            if target is None or code == 0:
                if code != 0:
                    failures.append("the last resume exited %d" % code)
                break
            kills += 1
            proc = start(a.cli, ["--db", db, "resume", run_id, "--json"])
            first = proc.stdout.readline()  # the stream starts with the resumed event
            while first and '"resumed"' not in first:
                first = proc.stdout.readline()
            from_step = json.loads(first)["from_step"] if first else -1
            redone.append(reached - from_step)
            print("kill %2d at step %4d: resumed from step %4d, %3d steps redone" % (kills, reached, from_step,
                                                                                     reached - from_step))
        weights = tensors(os.path.join(run_dir, "model.safetensors"))
        same = weights.keys() == ref_weights.keys() and all(weights[k] == ref_weights[k] for k in weights)
        if not same:
            failures.append("final weights differ from the uninterrupted run's")
        con = sqlite3.connect(db)
        if con.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            failures.append("integrity_check failed")
        rid = con.execute("SELECT rid FROM runs WHERE id = ?", (run_id,)).fetchone()
        rid = rid[0] if rid else None
        dup = con.execute("SELECT COUNT(*) FROM (SELECT metric, step FROM samples WHERE run = ? "
                          "GROUP BY metric, step HAVING COUNT(*) > 1)", (rid,)).fetchone()[0]
        if dup:
            failures.append("%d duplicate (metric, step) samples" % dup)
        status = con.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        if status != "finished":
            failures.append("status " + status)
        resumed = con.execute("SELECT COUNT(*) FROM events WHERE run = ? AND kind = 'resumed'", (rid,)).fetchone()[0]
        if resumed != kills:
            failures.append("%d resumed events for %d kills" % (resumed, kills))
        ref = sqlite3.connect(ref_db)

        def final(c, metric):
            return c.execute("SELECT s.value FROM samples s JOIN metric_keys k ON k.id = s.metric "
                             "JOIN runs r ON r.rid = s.run WHERE k.name = ? ORDER BY s.step DESC LIMIT 1",
                             (metric,)).fetchone()
        for m in ("test/accuracy", "test/loss"):
            if final(con, m) != final(ref, m):
                failures.append("final %s %s vs %s uninterrupted" % (m, final(con, m), final(ref, m)))
        print("summary: %d kills, steps redone max %d mean %.1f, weights %s, integrity ok, %d duplicates, "
              "status %s, %d resumed events" % (kills, max(redone or [0]), sum(redone) / max(len(redone), 1),
                                                "identical" if same else "DIFFERENT", dup, status, resumed))
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAILED: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
