#!/usr/bin/env python3
"""Throughput of every training-like phase against a reference training: one small `lathe-cli run`
per stage kind (masked fine-tuning one-shot / AGP / N:M / sensitivity-picked, structured prune +
fine-tuning, low-rank + fine-tuning, QAT, PTQ calibration, distillation from a zoo teacher and from a
teacher file, f16 / bf16 training), 1 thread each (--threads: on a loaded machine two OpenMP threads
waiting on each other make every ratio noise; one thread still shows any serial or element-wise
overhead against the same thread's training). Per phase: the median of its logged
train/samples_per_s points after the first (the first holds the phase's warm-up) as a ratio to the
reference's, the median device/util, and the phase's wall seconds (evaluation, latency measurement,
calibration, sensitivity analysis, SVD... included: what a user waits on between training phases).

The reference is the main training of the same run, except where the row says otherwise: the
distilled student against the teacher's training in the same run (a distillation step adds a teacher
forward, about a third of a teacher training step, so it should be faster than that), the student
distilled from a teacher file against the student trained alone (separate run: from the second epoch
the teacher's outputs come from the cache), f16 / bf16 against f32 (separate run). A phase doing more
work per step (masks, fake quantization) may be somewhat slower; a ratio under the row's floor is
marked SLOW? (masked fine-tuning once ran 6-8x slower than training because of an element-wise mask,
QAT 3x because of a serial fake quantization, the cached distillation 2x because of its image hash).
Ratios only, measured on this machine's CPU: each run sees the machine's load, so a loaded machine
still reads, but with noise (--rounds 3 takes the median of 3). About 1-2 minutes a round on 2 shared cores.
System python3 only.

Usage: bench/phase_throughput.py [--cli build/app/lathe-cli] [--rows "prune nm 2:4,qat"] [--rounds 1]
       [--threads 1] [--subset 4096] [--json out.json] [--strict: exit 1 when a row is SLOW?]"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS = 1  # --threads
TEACHER_FILE = "{teacher file}"  # replaced by the model.safetensors of the "teacher" row's run

# label: (preset, --set overrides, measured phase, reference, floor). reference: a phase of the same
# run, or "row:<label>" for that row's main training (a separate run). floor: the ratio under which
# the row is marked SLOW? (None: a reference row, or a phase with no steps: its wall time is the point).
ROWS = {
    "mlp f32": ("experiments/mlp.json", [], "train", None, None),
    "mlp f16": ("experiments/precision-f16-mlp.json", [], "train", "row:mlp f32", 0.5),
    "mlp bf16": ("experiments/mlp.json", ["train.precision=bf16"], "train", "row:mlp f32", 0.5),
    "prune one-shot": ("experiments/prune-sensitivity.json",
                       ["model.zoo=mlp", "prune.sensitivity=false", "prune.sensitivity_pick=false",
                        "prune.finetune_epochs=1"], "finetune", "train", 0.6),
    "prune agp": ("experiments/prune-agp80.json", ["model.zoo=mlp", "prune.finetune_epochs=1",
                                                   "prune.agp.frequency=4"], "finetune", "train", 0.6),
    "prune nm 2:4": ("experiments/prune-nm24.json", ["prune.finetune_epochs=1"], "finetune", "train", 0.6),
    "prune sensitivity": ("experiments/prune-sensitivity.json",
                          ["model.zoo=mlp", "prune.sensitivity_samples=1000", "prune.finetune_epochs=1"],
                          "finetune", "train", 0.6),
    "prune structured cnn": ("experiments/prune-structured.json",
                             ["data.train_subset=2048", "prune.finetune_epochs=1"], "finetune", "train", 0.8),
    "lowrank": ("experiments/mlp-lowrank.json", ["lowrank.finetune_epochs=1"], "finetune", "train", 0.8),
    "qat": ("experiments/quant-qat.json", ["model.zoo=mlp", "quant.qat_epochs=1"], "qat", "train", 0.4),
    "ptq compare": ("experiments/quant-compare.json", ["model.zoo=mlp"], "calibrate", "train", None),
    "distill zoo teacher": ("experiments/distill-student.json", ["distill.teacher_epochs=1"], "train",
                            "teacher", 1.0),
    "teacher": ("experiments/cnn.json", ["model.zoo=teacher", "data.train_subset=1024"], "train", None, None),
    "student alone": ("experiments/distill-3ep-const.json", ["distill.teacher=", "train.epochs=3"], "train",
                      None, None),
    "distill teacher file": ("experiments/distill-3ep-const.json",
                             ["distill.teacher=" + TEACHER_FILE, "train.epochs=3"], "train",
                             "row:student alone", 0.4),
}
NEEDS = {"distill teacher file": ["teacher"]}  # rows whose sets name another row's output


def run(cli, work, label, preset, sets, subset):
    """One run; returns (its phases, its run folder)."""
    out = tempfile.mkdtemp(dir=work)
    cmd = [cli, "--db", os.path.join(work, "bench.db"), "run", os.path.join(ROOT, preset),
           "--set", "train.epochs=1", "--set", f"data.train_subset={subset}", "--set", "data.test_subset=1000",
           "--set", f"output.dir={out}", "--set", f"train.threads={THREADS}", "--set", f"name=phase-throughput {label}"]
    for s in sets:
        cmd += ["--set", s]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    run_dir = next(os.path.join(out, d) for d in os.listdir(out) if os.path.isdir(os.path.join(out, d)))
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return phases([json.loads(line) for line in f]), run_dir


def phases(lines):
    """Per phase, in file order: its samples/s and device/util points (by step range) and its wall
    seconds (from the last timestamp before its phase event to the last before the next one). The
    teacher's training (events with stage "teacher", metrics under teacher/) is the phase "teacher"."""
    out, cur, last_ms = [], None, 0.0
    for j in lines:
        if j.get("event") == "phase":
            if cur:
                cur["wall_s"] = (last_ms - cur["start_ms"]) / 1000
            teacher = j.get("stage") == "teacher"
            cur = {"name": j["phase"], "prefix": "teacher/" if teacher else "", "first": j["first_step"],
                   "steps": j["steps"], "start_ms": last_ms, "sps": [], "util": []}
            out.append(cur)
        elif "metric" in j:
            last_ms = max(last_ms, j["wall_ms"])
            if cur and cur["first"] < j["step"] <= cur["first"] + cur["steps"]:
                if j["metric"] == cur["prefix"] + "train/samples_per_s":
                    cur["sps"].append(j["value"])
                elif j["metric"] == cur["prefix"] + "device/util":
                    cur["util"].append(j["value"])
    if cur:
        cur["wall_s"] = (last_ms - cur["start_ms"]) / 1000
    for p in out:
        p["median_sps"] = statistics.median(p["sps"][1:] or p["sps"]) if p["sps"] else None
        p["median_util"] = statistics.median(p["util"][1:] or p["util"]) if p["util"] else None
    return out


def find(ps, name):
    return next((p for p in ps if p["name"] == name), None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "app", "lathe-cli"))
    ap.add_argument("--rows", default=",".join(ROWS), help="comma-separated row labels (default: all)")
    ap.add_argument("--rounds", type=int, default=1, help="runs per row; ratios are the median over rounds")
    ap.add_argument("--subset", type=int, default=4096, help="data.train_subset of every run (unless its row sets one)")
    ap.add_argument("--json", help="also write the table as JSON here")
    ap.add_argument("--threads", type=int, default=1,
                    help="train.threads of every run (1: robust to a loaded machine; 2 to read device/util)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a row is marked SLOW?")
    a = ap.parse_args()
    wanted = [r.strip() for r in a.rows.split(",") if r.strip()]
    for r in wanted:
        if r not in ROWS:
            raise SystemExit(f"--rows: unknown row '{r}'; allowed: {', '.join(ROWS)}")
    global THREADS
    THREADS = a.threads
    if a.rounds < 1:
        raise SystemExit(f"--rounds: {a.rounds}; allowed: 1 or more")
    if not os.access(a.cli, os.X_OK):
        raise SystemExit(f"--cli: {a.cli} is not an executable (build it: scripts/build.sh build)")
    todo = []  # a row's references and inputs run before it
    for r in wanted:
        ref = ROWS[r][3]
        for dep in NEEDS.get(r, []) + ([ref[4:]] if ref and ref.startswith("row:") else []):
            if dep not in todo:
                todo.append(dep)
        if r not in todo:
            todo.append(r)
    work = tempfile.mkdtemp(prefix="phase_throughput.")
    rounds = []  # per round: label -> phases
    try:
        for k in range(a.rounds):
            got, dirs = {}, {}
            for label in todo:
                preset, sets, _, _, _ = ROWS[label]
                if TEACHER_FILE in " ".join(sets):
                    sets = [s.replace(TEACHER_FILE, os.path.join(dirs["teacher"], "model.safetensors")) for s in sets]
                print(f"round {k + 1}/{a.rounds}: {label} ...", file=sys.stderr, flush=True)
                got[label], dirs[label] = run(a.cli, work, label, preset, sets, a.subset)
            rounds.append(got)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def med(xs):
        xs = [x for x in xs if x is not None]
        return statistics.median(xs) if xs else None

    table = []
    print(f"{'row':21} {'phase':10} {'samples/s':>10} {'ratio':>6}  {'reference':28} {'util':>5} {'wall s':>7}")
    for label in wanted:
        _, _, measured, ref, floor = ROWS[label]
        names = [p["name"] for p in rounds[0][label]]
        for name in names:
            sps, ratio, util, wall, ref_sps = [], [], [], [], []
            for got in rounds:
                p = find(got[label], name)
                if ref is None:
                    r = None
                elif ref.startswith("row:"):
                    r = find(got[ref[4:]], "train")
                else:
                    r = find(got[label], ref)
                sps.append(p["median_sps"])
                util.append(p["median_util"])
                wall.append(p["wall_s"])
                rs = r["median_sps"] if r else None
                ref_sps.append(rs)
                ratio.append(p["median_sps"] / rs if p["median_sps"] and rs and p is not r else None)
            row = {"row": label, "phase": name, "samples_per_s": med(sps), "ratio": med(ratio),
                   "reference": None if ref is None else (f"{ref[4:]} (separate run)" if ref.startswith("row:")
                                                          else f"{ref} (same run)"),
                   "reference_samples_per_s": med(ref_sps), "util": med(util), "wall_s": med(wall),
                   "measured": name == measured, "floor": floor if name == measured else None}
            row["slow"] = bool(row["floor"] is not None and row["ratio"] is not None and row["ratio"] < row["floor"])
            table.append(row)
            if row["samples_per_s"] is None and row["wall_s"] < 0.05 and name != measured:
                continue
            sps_s = f"{row['samples_per_s']:10.0f}" if row["samples_per_s"] else f"{'-':>10}"
            ratio_s = f"{row['ratio']:6.2f}" if row["ratio"] is not None and name == measured else f"{'':6}"
            ref_s = (row["reference"] or "") if name == measured and row["ratio"] is not None else ""
            util_s = f"{row['util']:5.2f}" if row["util"] is not None else f"{'-':>5}"
            flag = "  SLOW? (floor %.1f)" % floor if row["slow"] else ""
            mark = "*" if name == measured else " "
            print(f"{label:21} {mark}{name:9} {sps_s} {ratio_s}  {ref_s:28} {util_s} {row['wall_s']:7.2f}{flag}")
    print(f"* the phase the row measures; ratio: its samples/s over the reference's (median of the points "
          f"after the first; over {a.rounds} round(s)); util: median device/util; wall s: the phase's wall "
          f"time, evaluation and measurements included")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(table, f, indent=2)
    return 1 if a.strict and any(r["slow"] for r in table) else 0


if __name__ == "__main__":
    sys.exit(main())
