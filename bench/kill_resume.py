#!/usr/bin/env python3
"""kill -9 and resume (issue 14 acceptance): a real `lathe-cli run` (1 thread, fixed seed,
checkpoint.every_steps) is killed with SIGKILL at --kills random steps (as soon as its
metrics.jsonl shows a training sample at that step), each time continued with
`lathe-cli resume RUN`, until it finishes. Then its final weights must equal an uninterrupted
run's bit for bit, its final test metrics too, the store must pass PRAGMA integrity_check, hold no
duplicate (metric, step) sample, one `resumed` event per kill, and status finished. Per kill it
prints the step reached (the last sample the killed process printed), the checkpoint step it
resumed from and the steps redone (reached - resumed: at most every_steps - 1 plus the steps the
process ran between its last logged sample and the kill; samples are logged ~20 times an epoch).
With --devices N the run is data-parallel (N ranks of 1 thread; the kill hits rank 0, whose
workers die with it) and the reference is an uninterrupted N-rank run; --shard-optimizer adds
ZeRO-1, so each checkpoint gathers the optimizer shards. With --launcher slurm the N ranks are
started separately, as srun starts them on N nodes (Slurm's variables, a shared rendezvous folder,
a new step id for every start); the kill hits rank 0 alone, the others must fail on their own
within compute.timeout_s, and every rank then runs `lathe-cli resume RUN`. --set adds config
values: stages after the training (e.g. --set prune.method=l1-structured --set
prune.finetune_epochs=2) put kills in their fine-tuning too (its steps log train/* samples), and
every model file of the run (model.pruned.safetensors, model_int8.safetensors, ...) must then equal
the uninterrupted run's. System python3 and its sqlite3 module only.

Usage: bench/kill_resume.py [--cli build/app/lathe-cli] [--kills 20] [--model cnn] [--every-steps 50]
       [--train-subset 4096] [--epochs 2] [--batch-size 32] [--seed 1] [--devices 1] [--shard-optimizer]
       [--launcher slurm] [--set KEY=VALUE ...]
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
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tensors(path):
    """name -> (dtype, shape, raw bytes) of a safetensors file, metadata left out."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: (v["dtype"], tuple(v["shape"]), data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


def reached_since(jsonl, offset):
    """The last train/* step in metrics.jsonl after byte `offset`: where the process was."""
    last = -1
    if not jsonl or not os.path.exists(jsonl):
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


def resumed_from(jsonl, offset):
    """from_step of the first resumed event after byte `offset`, -1 when there is none yet."""
    with open(jsonl) as f:
        f.seek(offset)
        for line in f:
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if isinstance(j, dict) and j.get("event") == "resumed":
                return j["from_step"]
    return -1


def size(path):
    return os.path.getsize(path) if path and os.path.exists(path) else 0


def start(cli, args, env=None):
    return subprocess.Popen([cli] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)


class Ranks:
    """A run's processes: one lathe-cli (which starts its own workers), or with a launcher one per
    rank, each with the variables srun gives its task; `ranks[0]` is rank 0."""

    def __init__(self, cli, args, devices, launcher, step):
        if not launcher:
            self.ranks = [start(cli, args)]
            return
        self.ranks = []
        for r in range(devices):
            env = dict(os.environ, SLURM_PROCID=str(r), SLURM_LOCALID="0", SLURM_NTASKS=str(devices),
                       SLURM_JOB_ID="4242", SLURM_STEP_ID=str(step), LATHE_DIST_HOST="127.0.0.1")
            self.ranks.append(start(cli, args, env))

    def poll(self):
        return self.ranks[0].poll()

    def send_signal(self, sig):
        self.ranks[0].send_signal(sig)

    def wait(self, timeout_s):
        """Rank 0's exit code, once every rank has exited; the other ranks (which lost rank 0 when
        it was killed) must end by themselves within timeout_s, else they are killed and named."""
        self.ranks[0].wait()
        late = []
        for i, p in enumerate(self.ranks[1:], 1):
            try:
                p.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                late.append(i)
        self.late = late
        return self.ranks[0].returncode

    @property
    def stderr(self):
        return "\n".join("rank %d: %s" % (i, p.stderr.read()) for i, p in enumerate(self.ranks)) \
            if len(self.ranks) > 1 else self.ranks[0].stderr.read()


def run_until(proc, jsonl_of, offset, kill_at_step, timeout_s):
    """Follows the run's metrics.jsonl (written line by line, unlike a block-buffered pipe) from
    byte `offset`; SIGKILLs rank 0 as soon as a train/* sample at step >= kill_at_step is there
    (None: let it finish). jsonl_of() finds the file once the run folder exists. Returns (exit
    code, stderr)."""
    while proc.poll() is None:
        jsonl = jsonl_of()
        if kill_at_step is not None and jsonl and reached_since(jsonl, offset) >= kill_at_step:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    code = proc.wait(timeout_s + 10)
    err = proc.stderr
    if proc.late:
        err += "\nranks %s still ran %g s after rank 0 ended" % (proc.late, timeout_s + 10)
    return code, err


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
    ap.add_argument("--devices", type=int, default=1, help="ranks (compute.devices)")
    ap.add_argument("--shard-optimizer", action="store_true", help="ZeRO-1 (compute.shard_optimizer)")
    ap.add_argument("--launcher", choices=["slurm"], help="start every rank separately, as srun does")
    ap.add_argument("--timeout-s", type=float, default=10, help="compute.timeout_s")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="another config value (repeatable), e.g. a stage after the training")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tmp = tempfile.mkdtemp(prefix="lathe-kill-resume-")
    sets = ["model.zoo=" + a.model, "train.epochs=%d" % a.epochs, "train.batch_size=%d" % a.batch_size,
            "train.threads=1", "seed=7", "data.train_subset=%d" % a.train_subset,
            "data.test_subset=%d" % a.test_subset, "checkpoint.every_steps=%d" % a.every_steps,
            "checkpoint.keep=2", "name=kill-resume", "compute.devices=%d" % a.devices,
            "compute.timeout_s=%g" % a.timeout_s]
    if a.shard_optimizer:
        sets.append("compute.shard_optimizer=true")
    sets += a.set
    if a.launcher:
        sets.append("compute.rendezvous=" + os.path.join(tmp, "shared"))
    steps = iter(range(1000))  # srun's step id: a new one for every start
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

        def run_dir_in(out):
            # A data-parallel run also leaves <id>.ranks folders (its rendezvous and the workers' logs).
            found = [os.path.join(out, d) for d in os.listdir(out) if not d.endswith(".ranks")] \
                if os.path.isdir(out) else []
            return found[0] if found else None

        # The uninterrupted reference.
        ref_db, ref_out = os.path.join(tmp, "ref.db"), os.path.join(tmp, "ref-runs")
        code, err = run_until(Ranks(a.cli, run_args(ref_db, ref_out), a.devices, a.launcher, next(steps)),
                              lambda: None, 0, None, a.timeout_s)
        if code != 0:
            print("reference run failed (exit %d): %s" % (code, err))
            return 1
        total = reached_since(os.path.join(run_dir_in(ref_out), "metrics.jsonl"), 0)
        # Every model file the run writes: the trained model and what the stages after it made.
        model_files = sorted(f for f in os.listdir(run_dir_in(ref_out)) if f.endswith(".safetensors"))
        ref_weights = {f: tensors(os.path.join(run_dir_in(ref_out), f)) for f in model_files}
        print("reference: %d steps, %s" % (total, ", ".join("%s (%d tensors)" % (f, len(ref_weights[f]))
                                                             for f in model_files)))

        # The killed run: every kill at a random later step, then resume until it finishes.
        db, out = os.path.join(tmp, "kill.db"), os.path.join(tmp, "kill-runs")

        def jsonl_of():
            d = run_dir_in(out)
            return os.path.join(d, "metrics.jsonl") if d else None

        targets = sorted(rng.sample(range(1, total), min(a.kills, total - 1)))
        proc = Ranks(a.cli, run_args(db, out), a.devices, a.launcher, next(steps))
        redone, kills, offset = [], 0, 0
        for target in targets + [None]:
            code, err = run_until(proc, jsonl_of, offset, target, a.timeout_s)
            if target is not None and code not in (0, -signal.SIGKILL):  # it ended before the kill
                failures.append("a run or resume before kill %d exited %d: %s" % (kills + 1, code, err.strip()))
            if "still ran" in err:
                failures.append(err.strip().splitlines()[-1])
            if target is None or code == 0:
                if code != 0:
                    failures.append("the last resume exited %d: %s" % (code, err.strip()))
                break
            kills += 1
            jsonl = jsonl_of()
            reached = reached_since(jsonl, offset)
            offset = size(jsonl)
            run_id = os.path.basename(run_dir_in(out))
            proc = Ranks(a.cli, ["--db", db, "resume", run_id], a.devices, a.launcher, next(steps))
            from_step = -1
            while from_step < 0 and proc.poll() is None:  # the resumed event, once it is written
                from_step = resumed_from(jsonl, offset)
                time.sleep(0.002)
            if from_step < 0:
                from_step = resumed_from(jsonl, offset)
            redone.append(reached - from_step)
            print("kill %2d at step %4d: resumed from step %4d, %3d steps redone" % (kills, reached, from_step,
                                                                                     reached - from_step))
        run_dir = run_dir_in(out)
        run_id = os.path.basename(run_dir)
        same = True
        for f in model_files:
            path = os.path.join(run_dir, f)
            weights = tensors(path) if os.path.exists(path) else {}
            if weights.keys() != ref_weights[f].keys() or any(weights[k] != ref_weights[f][k] for k in weights):
                failures.append("%s differs from the uninterrupted run's" % f)
                same = False
        con = sqlite3.connect(db)
        integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
        if integrity != "ok":
            failures.append("integrity_check: " + integrity)
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
        if a.devices > 1 and not a.launcher:  # every resume's rendezvous and logs sit in the run's .ranks folder
            extra = sorted(d for d in os.listdir(out) if d.endswith(".ranks") and d != run_id + ".ranks")
            if extra:
                failures.append("resumes left folders beside the run: " + ", ".join(extra))
            # Each resume removes the earlier resumes' folders once its ranks have met: the newest stays.
            resumes = [d for d in os.listdir(os.path.join(out, run_id + ".ranks")) if d.startswith("resume-")]
            if kills and len(resumes) != 1:
                failures.append("%d resume folders in %s.ranks after %d kills (want the newest alone)" %
                                (len(resumes), run_id, kills))
            elif kills and not os.path.exists(os.path.join(out, run_id + ".ranks", resumes[0], "rank1.log")):
                failures.append("no rank1.log in the newest resume folder " + resumes[0])
        ref = sqlite3.connect(ref_db)

        def final(c, metric):
            return c.execute("SELECT s.value FROM samples s JOIN metric_keys k ON k.id = s.metric "
                             "JOIN runs r ON r.rid = s.run WHERE k.name = ? ORDER BY s.step DESC LIMIT 1",
                             (metric,)).fetchone()
        for m in ("test/accuracy", "test/loss"):
            if final(con, m) != final(ref, m):
                failures.append("final %s %s vs %s uninterrupted" % (m, final(con, m), final(ref, m)))
        print("summary: %d kills, steps redone max %d mean %.1f, weights %s, integrity %s, %d duplicates, "
              "status %s, %d resumed events" % (kills, max(redone or [0]), sum(redone) / max(len(redone), 1),
                                                "identical" if same else "DIFFERENT", integrity, dup, status,
                                                resumed))
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAILED: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
