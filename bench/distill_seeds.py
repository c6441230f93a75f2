#!/usr/bin/env python3
"""The issue-5 distillation acceptance: the student distilled from the teacher (T=4, alpha=0.7,
5 epochs) against the same student trained alone with the same budget, over 3 seeds.

The teacher is trained ONCE (experiments/cnn.json's recipe with model.zoo=teacher) unless
--teacher names one (run:<id> or a .safetensors file); every distilled run then uses that same
teacher, and they share a teacher-output cache file (distill.teacher_cache) so the teacher's
forward passes over the training images are paid once (valid because the default config does
not augment: the teacher's eval-mode outputs per image are then identical in every epoch).

Prints the 6 test accuracies, the means and the margin, and writes them as JSON (--out).

  bench/distill_seeds.py --cli build/app/lathe-cli --db /tmp/distill.db
  bench/distill_seeds.py --cli build/app/lathe-cli --teacher run:20261202-183202-f6d68d --set distill.feature_pairs=1:8
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_cli(cli, config, sets, db, log):
    cmd = [cli, "run", config, "--json", "--db", db]
    for s in sets:
        cmd += ["--set", s]
    print("$ " + " ".join(cmd), flush=True)
    started, finished = None, None
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        for line in proc.stdout:
            out.write(line)
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if obj.get("event") == "started":
                started = obj
            elif obj.get("event") in ("finished", "cancelled"):
                finished = obj
        rc = proc.wait()
    if rc != 0 or finished is None:
        sys.exit(f"lathe-cli failed (exit {rc}); see {log}")
    return started, finished


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build/app/lathe-cli"))
    ap.add_argument("--db", default=None, help="run store (default: a temporary file)")
    ap.add_argument("--teacher", default="", help="run:<id> or a .safetensors file; empty = train one first")
    ap.add_argument("--teacher-epochs", type=int, default=5)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--set", action="append", default=[], help="extra --set for the distilled runs")
    ap.add_argument("--common", action="append", default=[], help="extra --set for every student run")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--out", default=None, help="JSON summary file")
    a = ap.parse_args()

    work = a.workdir or tempfile.mkdtemp(prefix="lathe-distill-")
    os.makedirs(work, exist_ok=True)
    db = a.db or os.path.join(work, "runs.db")
    runs_dir = os.path.join(work, "runs")
    teacher = a.teacher
    if not teacher:
        started, fin = run_cli(a.cli, os.path.join(ROOT, "experiments/cnn.json"),
                               ["model.zoo=teacher", f"train.epochs={a.teacher_epochs}", "name=distill-teacher",
                                "output.dir=" + runs_dir], db, os.path.join(work, "teacher.jsonl"))
        teacher = "run:" + started["run_id"]
        print(f"teacher {teacher}: test/accuracy {fin['metrics']['test/accuracy']:.4f}", flush=True)
    cache = os.path.join(work, "teacher-cache.bin")
    rows = []
    for seed in a.seeds:
        common = [f"seed={seed}", "output.dir=" + runs_dir] + a.common
        _, base = run_cli(a.cli, os.path.join(ROOT, "experiments/distill-baseline.json"), common, db,
                          os.path.join(work, f"baseline-{seed}.jsonl"))
        _, dist = run_cli(a.cli, os.path.join(ROOT, "experiments/distill-student.json"),
                          common + [f"distill.teacher={teacher}", "distill.teacher_cache=" + cache] + a.set, db,
                          os.path.join(work, f"distilled-{seed}.jsonl"))
        row = {"seed": seed, "baseline": base["metrics"]["test/accuracy"],
               "distilled": dist["metrics"]["test/accuracy"],
               "teacher_accuracy": dist["metrics"].get("distill/teacher_accuracy")}
        rows.append(row)
        print(f"seed {seed}: baseline {row['baseline']:.4f}  distilled {row['distilled']:.4f}  "
              f"(teacher {row['teacher_accuracy']:.4f})", flush=True)
    mb = sum(r["baseline"] for r in rows) / len(rows)
    md = sum(r["distilled"] for r in rows) / len(rows)
    margin_pt = 100 * (md - mb)
    print("\nseed  baseline  distilled  (test accuracy, full Fashion-MNIST test set)")
    for r in rows:
        print(f"{r['seed']:4d}  {100 * r['baseline']:7.2f}%  {100 * r['distilled']:8.2f}%")
    print(f"mean  {100 * mb:7.2f}%  {100 * md:8.2f}%   margin {margin_pt:+.2f} pt (target >= +0.30 pt): "
          f"{'MET' if margin_pt >= 0.3 else 'NOT MET'}")
    summary = {"teacher": teacher, "rows": rows, "mean_baseline": mb, "mean_distilled": md, "margin_pt": margin_pt,
               "extra_sets": a.set, "common_sets": a.common}
    if a.out:
        with open(a.out, "w") as f:
            json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
