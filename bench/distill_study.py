#!/usr/bin/env python3
"""The distillation study (issue 16): where knowledge distillation pays, in Lathe and in PyTorch.

One teacher (experiments/cnn.json with model.zoo=teacher, 5 epochs) is trained once by Lathe and its
model.safetensors is the teacher of every distilled run, in both frameworks. Then:

  1. the grid: data.train_subset in {1000, 6000, 60000} x budget {1 epoch constant LR, 3 epochs
     constant LR, 5 epochs cosine} x student {784-64-10, 784-32-10}, the student alone (baseline)
     and distilled (T=4, alpha=0.7), 3 seeds each, in Lathe (lathe-cli, one store) and in PyTorch
     (bench/peers/torch_distill.py, Lathe's epoch order);
  2. T in {1, 2, 4, 8} x alpha in {0.5, 0.7, 0.9} at the regime where Lathe's mean gain is largest;
  3. at that regime and the best T/alpha: feature distillation (distill.feature_pairs=1:8, weight 0.3,
     through the Linear projection) and student augmentation (data.augment shift_px=1,
     noise_std=0.1, distill.student_augment_factor=1.2), each against logit KD alone;
  4. any cell where the two disagree: rerun with 10 seeds, and Lathe again from PyTorch's initial
     weights (model.init_from; torch_distill.py --export-init) for a per-run comparison;
  5. the preset (--preset, experiments/distill-3ep-const.json) rerun with this teacher, with and
     without KD (distill.teacher=""), 3 seeds.

With --same-init every student run of 1-3, in both frameworks, starts from the same weights: PyTorch's
initial weights for that width and seed (torch_distill.py --export-init into <out>/init, read by
Lathe's model.init_from and by the PyTorch cell's init_from), and the feature projection from Lathe's
rule (torch_distill.py ports it, projection_init=lathe). Both sides then share weights, teacher and
epoch order (augmentation draws stay each framework's own), so the report adds, per cell, the largest
difference between a Lathe run's test accuracy and the PyTorch run of the same seed and variant.
These runs are named "... same-init seed=<s>"; step 4 is not run (the comparison is per run already).
--parts runs a subset (regimes, talpha, variants, preset; talpha and variants read the regime grid
from <out> when it is not in --parts); a restart reuses every result already in <out>.

Gain = test accuracy distilled - baseline of the same seed (same init and data order within a
framework), in points; a cell reports the mean over seeds and the spread (sample standard deviation
of the per-seed gains). Every Lathe run lands in <out>/study.db, named
"kd16 n=<subset> <budget> <student> <variant> seed=<s>"; results in <out>/lathe.jsonl and
<out>/torch.jsonl (a rerun skips what is there); the report in <out>/report.{md,json,html}.
Each run uses one thread (train.threads=1, torch.set_num_threads(1)) and runs alone (with --parallel,
one Lathe run and one PyTorch run at a time).

  python3 bench/distill_study.py --out /work/kd16-out            # the study (about an hour, 2 cores)
  python3 bench/distill_study.py --out /tmp/kd-quick --quick     # smoke run (a few minutes)
  python3 bench/distill_study.py --out /work/kd-same --same-init --parallel   # the same from shared weights
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUDGETS = {"e1c": (1, "constant"), "e3c": (3, "constant"), "e5cos": (5, "cosine")}
BUDGET_LABEL = {"e1c": "1 epoch, const LR", "e3c": "3 epochs, const LR", "e5cos": "5 epochs, cosine"}
STUDENTS = {"784-64-10": 64, "784-32-10": 32}
AUGMENT = {"shift_px": 1, "hflip": False, "noise_std": 0.1, "strength": 1.0}
AUGMENT_FACTOR = 1.2
FEATURE_PAIRS, FEATURE_WEIGHT = "1:8", 0.3


def student_model(hidden):
    """The model section: the zoo student for 64, the same layers (same node names) as custom otherwise."""
    if hidden == 64:
        return {"zoo": "student"}
    return {"zoo": "custom", "layers": [{"type": "flatten", "name": "flat"}, {"type": "linear", "out": hidden, "name": "0"},
                                        {"type": "relu", "name": "1"}, {"type": "linear", "out": 10, "name": "2"}]}


def lathe_config(cell, teacher_file, cache_dir, runs_dir):
    epochs, schedule = BUDGETS[cell["budget"]]
    cfg = {"name": cell["id"], "seed": cell["seed"],
           "description": "issue-16 distillation study (bench/distill_study.py)",
           "data": {"dataset": "fashion-mnist", "train_subset": cell["subset"]},
           "model": student_model(STUDENTS[cell["student"]]),
           "train": {"epochs": epochs, "batch_size": 128, "threads": 1, "save_model": False,
                     "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9}, "schedule": {"type": schedule}},
           "compute": {"backend": "cpu"}, "cost": {"instance": "local"}, "output": {"dir": runs_dir}}
    if cell["kd"]:
        feat = cell.get("feature_weight", 0) > 0
        cfg["distill"] = {"teacher": teacher_file, "temperature": cell["temperature"], "alpha": cell["alpha"],
                          "feature_pairs": FEATURE_PAIRS if feat else "", "feature_weight": FEATURE_WEIGHT,
                          "student_augment_factor": AUGMENT_FACTOR if cell.get("augment") else 1.0,
                          "teacher_cache": os.path.join(cache_dir, "teacher-cache-f8.bin" if feat else "teacher-cache.bin")}
    if cell.get("augment"):
        cfg["data"]["augment"] = dict(AUGMENT)
    if cell.get("torch_init") or cell.get("same_init"):  # PyTorch's initial weights for this seed
        cfg["model"]["init_from"] = init_file(cache_dir, cell)
    return cfg


def init_file(out, cell):
    """The student's initial weights for the cell's width and seed (torch_distill.py --export-init)."""
    return os.path.join(out, "init", f"student{STUDENTS[cell['student']]}-seed{cell['seed']}.safetensors")


def run_cli(cli, config_path, db, log, extra=()):
    cmd = [cli, "run", config_path, "--json", "--db", db] + list(extra)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    started = finished = None
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
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
        sys.exit(f"lathe-cli failed (exit {rc}) on {config_path}; see {log}")
    return started, finished


def cell_id(c):
    v = "base" if not c["kd"] else f"kd T={c['temperature']:g} a={c['alpha']:g}"
    if c.get("feature_weight", 0) > 0:
        v += " +feat"
    if c.get("augment"):
        v += " +aug"
    if c.get("torch_init"):
        v += " init=torch"
    if c.get("same_init"):
        v += " same-init"
    return f"kd16 n={c['subset']} {c['budget']} {c['student']} {v} seed={c['seed']}"


SAME_INIT = False  # --same-init: every cell of steps 1-3 starts from the shared weights


def make_cell(subset, budget, student, seed, kd, T=4.0, alpha=0.7, feature=False, augment=False, torch_init=False):
    c = {"subset": subset, "budget": budget, "student": student, "seed": seed, "kd": kd,
         "temperature": T, "alpha": alpha}
    if torch_init:
        c["torch_init"] = True
    elif SAME_INIT:
        c["same_init"] = True
    if feature:
        c["feature_weight"] = FEATURE_WEIGHT
    if augment:
        c["augment"] = True
    c["id"] = cell_id(c)
    return c


def read_jsonl(path):
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return {r["id"]: r for r in (json.loads(line) for line in f if line.strip())}


def run_lathe(cells, a, teacher_file):
    done = read_jsonl(a.lathe_out)
    todo = [c for c in cells if c["id"] not in done]
    for k, c in enumerate(todo):
        cfg = lathe_config(c, teacher_file, a.out, a.runs_dir)
        safe = c["id"].replace(" ", "_").replace("=", "")
        path = os.path.join(a.out, "configs", safe + ".json")
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2)
        t0 = time.time()
        started, fin = run_cli(a.cli, path, a.db, os.path.join(a.out, "logs", safe + ".jsonl"))
        row = dict(c, test_accuracy=fin["metrics"]["test/accuracy"], run_id=started["run_id"],
                   teacher_accuracy=fin["metrics"].get("distill/teacher_accuracy"), wall_s=time.time() - t0)
        with open(a.lathe_out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"[lathe {k + 1}/{len(todo)}] {c['id']}: {100 * row['test_accuracy']:.2f}% ({row['wall_s']:.1f} s)",
              flush=True)
    return read_jsonl(a.lathe_out)


def run_torch(cells, a, teacher_file, phase):
    """Runs the PyTorch side of `cells` (in the background with --parallel: call the result to wait)."""
    proc = start_torch(cells, a, teacher_file, phase)

    def wait():
        if proc is not None and proc.wait() != 0:
            sys.exit(f"torch_distill.py failed (exit {proc.returncode})")
        return read_jsonl(a.torch_out)
    return wait if a.parallel else wait()


def start_torch(cells, a, teacher_file, phase):
    torch_cells = []
    done = read_jsonl(a.torch_out)
    # PyTorch starts from its own init (which --export-init writes) except where told otherwise
    cells = [c for c in cells if not c.get("torch_init") and c["id"] not in done]
    if not cells:
        return None
    for c in cells:
        epochs, schedule = BUDGETS[c["budget"]]
        t = {"id": c["id"], "subset": c["subset"], "epochs": epochs, "schedule": schedule,
             "hidden": STUDENTS[c["student"]], "seed": c["seed"], "kd": c["kd"],
             "temperature": c["temperature"], "alpha": c["alpha"], "feature_weight": c.get("feature_weight", 0)}
        if c.get("augment"):
            t["augment"] = dict(AUGMENT, strength=AUGMENT["strength"] * AUGMENT_FACTOR)
        if c.get("same_init"):
            t["init_from"] = init_file(a.out, c)
            t["projection_init"] = "lathe"
        torch_cells.append(t)
    path = os.path.join(a.out, f"torch-cells-{phase}.json")
    with open(path, "w") as f:
        json.dump(torch_cells, f)
    cmd = [a.python, os.path.join(ROOT, "bench/peers/torch_distill.py"), "--teacher", teacher_file, "--cells", path,
           "--out", a.torch_out, "--threads", "1"]
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.Popen(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"))


def both(cells, a, teacher_file, phase):
    """Lathe and PyTorch results after running `cells` in each (at the same time with --parallel)."""
    pending = run_torch(cells, a, teacher_file, phase) if not a.skip_torch else read_jsonl(a.torch_out)
    lres = run_lathe(cells, a, teacher_file)
    return lres, (pending() if callable(pending) else pending)


def gain_stats(results, base_cells, kd_cells):
    """Per-seed gains in points (kd - base of the same seed), their mean and sample std."""
    gains, base_acc, kd_acc = [], [], []
    for b, k in zip(base_cells, kd_cells):
        if b["id"] in results and k["id"] in results:
            gains.append(100 * (results[k["id"]]["test_accuracy"] - results[b["id"]]["test_accuracy"]))
            base_acc.append(100 * results[b["id"]]["test_accuracy"])
            kd_acc.append(100 * results[k["id"]]["test_accuracy"])
    if not gains:
        return None
    sd = statistics.stdev(gains) if len(gains) > 1 else 0.0
    return {"gains": gains, "mean": statistics.fmean(gains), "sd": sd, "n": len(gains),
            "base": statistics.fmean(base_acc), "kd": statistics.fmean(kd_acc)}


def max_run_diff(lres, tres, cells):
    """The largest |Lathe - PyTorch| test accuracy (points) over runs of `cells` present in both."""
    d = [100 * abs(lres[c["id"]]["test_accuracy"] - tres[c["id"]]["test_accuracy"])
         for c in cells if c["id"] in lres and c["id"] in tres]
    return max(d) if d else None


def agree(l, p):
    """The acceptance rule: means within 0.3 pt, or within the two seed spreads where those are wider."""
    diff = abs(l["mean"] - p["mean"])
    return diff <= max(0.3, l["sd"] + p["sd"]), diff


def fmt(s):
    return "n/a" if s is None else f"{s['mean']:+.2f} ± {s['sd']:.2f}"


PARTS = ("regimes", "talpha", "variants", "preset")


def export_init(a, seeds):
    """Writes <out>/init/student<H>-seed<S>.safetensors for every width and seed (PyTorch's own init)."""
    for hidden in STUDENTS.values():
        missing = [s for s in seeds if not os.path.exists(os.path.join(a.out, "init", f"student{hidden}-seed{s}.safetensors"))]
        if missing:
            subprocess.check_call([a.python, os.path.join(ROOT, "bench/peers/torch_distill.py"), "--export-init",
                                   os.path.join(a.out, "init"), "--hidden", str(hidden), "--seeds"] + [str(x) for x in missing])


def main():
    global SAME_INIT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build/app/lathe-cli"))
    ap.add_argument("--python", default=os.path.expanduser("~/.cache/lathe/peers-venv/bin/python"),
                    help="the peers venv's python (bench/peers/setup-venv.sh)")
    ap.add_argument("--out", default="/tmp/lathe-distill-study")
    ap.add_argument("--teacher", default="", help="a teacher model.safetensors (in its run folder); empty = train one")
    ap.add_argument("--seeds", type=int, nargs="+", default=None)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 seed, subset 1000, 1 budget, tiny teacher")
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--same-init", action="store_true",
                    help="every student starts from PyTorch's initial weights for its width and seed, in both frameworks")
    ap.add_argument("--parts", default=",".join(PARTS),
                    help="comma-separated subset of " + ", ".join(PARTS) + " (results already in --out are reused)")
    ap.add_argument("--regime", default="",
                    help="SUBSET,BUDGET,STUDENT (e.g. 60000,e3c,784-64-10): run T x alpha and the variants there "
                         "instead of at the grid's largest Lathe gain (the grid is then not needed)")
    ap.add_argument("--parallel", action="store_true",
                    help="run the PyTorch side of each step at the same time as Lathe's (two processes)")
    ap.add_argument("--preset", default=os.path.join(ROOT, "experiments/distill-3ep-const.json"),
                    help="the preset to rerun at the end with the study's teacher (KD and, with distill.teacher=\"\", without)")
    a = ap.parse_args()
    parts = [p.strip() for p in a.parts.split(",") if p.strip()]
    for p in parts:
        if p not in PARTS:
            ap.error(f"--parts: '{p}'; allowed: {', '.join(PARTS)}")
    SAME_INIT = a.same_init
    regime = None
    if a.regime:
        f = a.regime.split(",")
        if len(f) != 3 or not f[0].isdigit() or f[1] not in BUDGETS or f[2] not in STUDENTS:
            ap.error(f"--regime: '{a.regime}'; allowed: SUBSET,BUDGET,STUDENT with BUDGET in {', '.join(BUDGETS)} "
                     f"and STUDENT in {', '.join(STUDENTS)}, e.g. 60000,e3c,784-64-10")
        regime = (int(f[0]), f[1], f[2])
    a.out = os.path.abspath(a.out)
    for d in ("configs", "logs", "runs"):
        os.makedirs(os.path.join(a.out, d), exist_ok=True)
    a.db = os.path.join(a.out, "study.db")
    a.runs_dir = os.path.join(a.out, "runs")
    a.lathe_out = os.path.join(a.out, "lathe.jsonl")
    a.torch_out = os.path.join(a.out, "torch.jsonl")
    seeds = a.seeds or ([0] if a.quick else [0, 1, 2])
    subsets = [1000] if a.quick else [60000, 6000, 1000]  # 60000 first: its first epoch fills the teacher cache
    budgets = ["e1c"] if a.quick else list(BUDGETS)
    temps, alphas = ([1.0, 4.0], [0.7]) if a.quick else ([1.0, 2.0, 4.0, 8.0], [0.5, 0.7, 0.9])
    t_start = time.time()

    # ---- the teacher, trained once ----
    teacher_file = a.teacher
    tmeta = os.path.join(a.out, "teacher.json")
    if not teacher_file and os.path.exists(tmeta):
        with open(tmeta) as f:
            teacher_file = json.load(f)["file"]
    if not teacher_file:
        sets = ["model.zoo=teacher", "train.epochs=1" if a.quick else "train.epochs=5", "train.threads=1",
                "name=kd16 teacher", "output.dir=" + a.runs_dir] + (["data.train_subset=2000"] if a.quick else [])
        cfg_path = os.path.join(a.out, "configs", "teacher.json")
        with open(os.path.join(ROOT, "experiments/cnn.json")) as f:
            cfg = json.load(f)
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2)
        cmd_sets = []
        for s in sets:
            cmd_sets += ["--set", s]
        t0 = time.time()
        log = os.path.join(a.out, "logs", "teacher.jsonl")
        started, finished = run_cli(a.cli, cfg_path, a.db, log, cmd_sets)
        if finished.get("event") != "finished":  # a cancelled teacher is no teacher
            sys.exit(f"teacher run failed; see {log}")
        teacher_file = os.path.join(a.runs_dir, started["run_id"], "model.safetensors")
        with open(tmeta, "w") as f:
            json.dump({"file": teacher_file, "run_id": started["run_id"], "wall_s": time.time() - t0,
                       "test_accuracy": finished["metrics"]["test/accuracy"]}, f, indent=2)
        print(f"teacher {teacher_file}: {100 * finished['metrics']['test/accuracy']:.2f}% "
              f"({time.time() - t0:.0f} s)", flush=True)
    if os.path.exists(tmeta):
        with open(tmeta) as f:
            teacher = json.load(f)
    else:  # --teacher given: its accuracy is in its own run, not measured here
        teacher = {"file": teacher_file, "test_accuracy": None}
    if teacher["file"] != teacher_file:
        sys.exit(f"--teacher {teacher_file}: {a.out} holds results of the teacher {teacher['file']}; use another --out")
    if a.same_init:
        export_init(a, seeds)

    # ---- 1. the grid ----
    regimes = [(n, b, s) for n in subsets for b in budgets for s in STUDENTS]
    grid = []
    for (n, b, s) in regimes:
        for seed in seeds:
            grid += [make_cell(n, b, s, seed, False), make_cell(n, b, s, seed, True)]
    if "regimes" in parts:
        lres, tres = both(grid, a, teacher_file, "grid")
    else:
        lres, tres = read_jsonl(a.lathe_out), read_jsonl(a.torch_out)

    def stats(res, n, b, s, **kd):
        base = [make_cell(n, b, s, seed, False) for seed in seeds]
        dist = [make_cell(n, b, s, seed, True, **kd) for seed in seeds]
        return gain_stats(res, base, dist)

    def runs_of(n, b, s, **kd):
        return [make_cell(n, b, s, seed, False) for seed in seeds] + [make_cell(n, b, s, seed, True, **kd) for seed in seeds]

    grid_rows = []
    for (n, b, s) in regimes:
        l, p = stats(lres, n, b, s), stats(tres, n, b, s)
        ok, diff = agree(l, p) if (l and p) else (None, None)
        grid_rows.append({"subset": n, "budget": b, "student": s, "lathe": l, "torch": p, "agree": ok, "diff": diff,
                          "max_run_diff": max_run_diff(lres, tres, runs_of(n, b, s)) if a.same_init else None})
    measured = [g for g in grid_rows if g["lathe"] is not None]
    steps = [p for p in parts if p in ("talpha", "variants")]
    if steps and len(measured) < len(grid_rows) and not regime:
        sys.exit(f"--parts {','.join(steps)} picks its regime from the whole grid: {len(grid_rows) - len(measured)} "
                 f"regimes have no results in {a.out}; add 'regimes' to --parts")
    best = max(measured, key=lambda r: r["lathe"]["mean"]) if measured else None
    if best:
        print(f"largest Lathe gain: n={best['subset']} {best['budget']} {best['student']}: {fmt(best['lathe'])}", flush=True)
    if regime:
        best = {"subset": regime[0], "budget": regime[1], "student": regime[2]}
    bn, bb, bs = (best["subset"], best["budget"], best["student"]) if best else (None, None, None)

    # ---- 2. T x alpha at that regime ----
    sweep_rows, bt = [], None
    if best and ("talpha" in parts or "variants" in parts):
        sweep_cells = [make_cell(bn, bb, bs, seed, False) for seed in seeds]  # the baselines (grid cells)
        sweep_cells += [make_cell(bn, bb, bs, seed, True, T, al) for T in temps for al in alphas for seed in seeds]
        if "talpha" in parts:
            lres, tres = both(sweep_cells, a, teacher_file, "sweep")
        for T in temps:
            for al in alphas:
                l, p = stats(lres, bn, bb, bs, T=T, alpha=al), stats(tres, bn, bb, bs, T=T, alpha=al)
                ok, diff = agree(l, p) if (l and p) else (None, None)
                sweep_rows.append({"temperature": T, "alpha": al, "lathe": l, "torch": p, "agree": ok, "diff": diff,
                                   "max_run_diff": max_run_diff(lres, tres, [make_cell(bn, bb, bs, seed, True, T, al)
                                                                             for seed in seeds]) if a.same_init else None})
        done = [r for r in sweep_rows if r["lathe"] is not None]
        if "variants" in parts and len(done) < len(sweep_rows):
            sys.exit(f"--parts variants runs at the best T/alpha: {len(sweep_rows) - len(done)} T/alpha cells have no "
                     f"results in {a.out}; add 'talpha' to --parts")
        if done:
            bt = max(done, key=lambda r: r["lathe"]["mean"])
            print(f"best T/alpha there: T={bt['temperature']:g} alpha={bt['alpha']:g}: {fmt(bt['lathe'])}", flush=True)

    # ---- 3. feature distillation and augmentation against logit KD alone ----
    extra_rows = []
    if bt and "variants" in parts:
        T, al = bt["temperature"], bt["alpha"]
        extra = [make_cell(bn, bb, bs, seed, True, T, al, feature=True) for seed in seeds] + \
                [make_cell(bn, bb, bs, seed, True, T, al, augment=True) for seed in seeds]
        lres, tres = both(extra, a, teacher_file, "extras")
        logit = [make_cell(bn, bb, bs, seed, True, T, al) for seed in seeds]
        base = [make_cell(bn, bb, bs, seed, False) for seed in seeds]
        proj_note = "Lathe's projection init in both" if a.same_init else "each framework's projection init"
        for name, kw in ((f"feature (1:8, w=0.3, Linear {bs.split('-')[1]}->256 projection, {proj_note})", {"feature": True}),
                         ("student augmentation (shift 1 px, noise 0.1, x1.2; each framework's own draws)", {"augment": True})):
            variant = [make_cell(bn, bb, bs, seed, True, T, al, **kw) for seed in seeds]
            row = {"variant": name}
            for fw, res in (("lathe", lres), ("torch", tres)):
                row[fw] = {"vs_logit_kd": gain_stats(res, logit, variant), "vs_baseline": gain_stats(res, base, variant)}
            vl, vp = row["lathe"]["vs_logit_kd"], row["torch"]["vs_logit_kd"]
            row["same_sign"] = (vl is not None and vp is not None and (vl["mean"] > 0) == (vp["mean"] > 0))
            row["max_run_diff"] = max_run_diff(lres, tres, variant) if a.same_init else None
            extra_rows.append(row)

    # ---- 4. cells where the two disagree: more seeds, and Lathe started from PyTorch's init ----
    investigations = []
    more_seeds = list(range(10)) if not a.quick else [0, 1]
    todo = [] if a.same_init else [(g["subset"], g["budget"], g["student"], 4.0, 0.7) for g in grid_rows
                                   if g["agree"] is False and "regimes" in parts]
    todo += [] if a.same_init or "talpha" not in parts else \
        [(bn, bb, bs, s_["temperature"], s_["alpha"]) for s_ in sweep_rows if s_["agree"] is False]
    todo = list(dict.fromkeys(todo))  # the sweep's T=4/alpha=0.7 cell is a grid cell too
    for (n, b, s, T_, a_) in todo:
        cells = [make_cell(n, b, s, seed, kd, T_, a_) for seed in more_seeds for kd in (False, True)]
        lres, tres = both(cells, a, teacher_file, "investigate")
        base10 = [make_cell(n, b, s, seed, False) for seed in more_seeds]
        kd10 = [make_cell(n, b, s, seed, True, T_, a_) for seed in more_seeds]
        l10, p10 = gain_stats(lres, base10, kd10), gain_stats(tres, base10, kd10)
        # the same initial weights and epoch order in both: per-run accuracies side by side
        export_init(a, seeds)
        same = [make_cell(n, b, s, seed, kd, T_, a_, torch_init=True) for seed in seeds for kd in (False, True)]
        lres = run_lathe(same, a, teacher_file)
        pairs = []
        for c in same:
            ref = make_cell(n, b, s, c["seed"], c["kd"], T_, a_)
            pairs.append({"seed": c["seed"], "kd": c["kd"], "lathe": 100 * lres[c["id"]]["test_accuracy"],
                          "torch": 100 * tres[ref["id"]]["test_accuracy"]})
        lsame = gain_stats(lres, [make_cell(n, b, s, seed, False, torch_init=True) for seed in seeds],
                           [make_cell(n, b, s, seed, True, T_, a_, torch_init=True) for seed in seeds])
        ok10, diff10 = agree(l10, p10) if (l10 and p10) else (None, None)
        investigations.append({"more_seeds": len(more_seeds), "subset": n, "budget": b, "student": s, "temperature": T_, "alpha": a_,
                               "seeds10": {"lathe": l10, "torch": p10, "agree": ok10, "diff": diff10},
                               "same_init": {"runs": pairs, "lathe_gain": lsame,
                                             "max_abs_run_diff": max(abs(p_["lathe"] - p_["torch"]) for p_ in pairs)}})

    # ---- 5. the preset (experiments/distill-3ep-const.json) with this teacher, and the same without KD ----
    preset = None
    if "preset" in parts and a.preset and os.path.exists(a.preset) and not a.quick:
        done = read_jsonl(a.lathe_out)
        for seed in seeds:
            for kd in (False, True):
                rid = f"kd16 preset {os.path.basename(a.preset)} {'kd' if kd else 'base'} seed={seed}"
                if rid in done:
                    continue
                sets = [f"seed={seed}", "train.threads=1", "train.save_model=false", "output.dir=" + a.runs_dir,
                        "name=" + rid, "distill.teacher=" + (teacher_file if kd else ""),
                        "distill.teacher_cache=" + os.path.join(a.out, "teacher-cache.bin")]
                cmd_sets = []
                for x in sets:
                    cmd_sets += ["--set", x]
                started, fin = run_cli(a.cli, a.preset, a.db, os.path.join(a.out, "logs", rid.replace(" ", "_") + ".jsonl"),
                                       cmd_sets)
                with open(a.lathe_out, "a") as f:
                    f.write(json.dumps({"id": rid, "test_accuracy": fin["metrics"]["test/accuracy"],
                                        "run_id": started["run_id"]}) + "\n")
        done = read_jsonl(a.lathe_out)
        gains = [100 * (done[f"kd16 preset {os.path.basename(a.preset)} kd seed={x}"]["test_accuracy"] -
                        done[f"kd16 preset {os.path.basename(a.preset)} base seed={x}"]["test_accuracy"]) for x in seeds]
        preset = {"file": os.path.relpath(a.preset, ROOT), "gains": gains, "mean": statistics.fmean(gains),
                  "sd": statistics.stdev(gains) if len(gains) > 1 else 0.0}

    report = {"teacher": teacher, "seeds": seeds, "grid": grid_rows, "investigations": investigations,
              "preset": preset, "same_init": a.same_init, "parts": parts,
              "best_regime": {"subset": bn, "budget": bb, "student": bs, "given": bool(regime)} if best else None,
              "sweep": sweep_rows,
              "best_T_alpha": {"temperature": bt["temperature"], "alpha": bt["alpha"], "lathe": bt["lathe"],
                               "torch": bt["torch"]} if bt else None,
              "extras": extra_rows, "augment": AUGMENT, "augment_factor": AUGMENT_FACTOR,
              "wall_s": time.time() - t_start, "quick": a.quick}
    write_report(report, a.out)
    return 0


def fmt3(s):
    return "n/a" if s is None else f"{s['mean']:+.3f} ± {s['sd']:.3f}"


def num(x, digits=2):
    return "n/a" if x is None else f"{x:.{digits}f}"


def write_report(r, out):
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(r, f, indent=2)
    same = r.get("same_init")
    L = []
    L.append("# Distillation study (issue 16)" + (", same initial weights in both frameworks" if same else "") + "\n")
    acc = r["teacher"]["test_accuracy"]
    L.append(f"Teacher: `{r['teacher']['file']}`, test accuracy {'n/a' if acc is None else f'{100 * acc:.2f}%'}. "
             f"Seeds {r['seeds']}. Gain = KD - baseline of the same seed, in points: mean ± sample std over seeds. "
             "Agree: |Lathe - PyTorch| <= max(0.3, sum of the two spreads).\n")
    if same:
        L.append("Every student (both frameworks) starts from PyTorch's initial weights for its width and seed "
                 "(`<out>/init`), the feature projection from Lathe's rule; teacher and epoch order are shared, "
                 "augmentation draws are not. \"run diff\" = the largest |Lathe - PyTorch| test accuracy over the "
                 "cell's runs (the same seed and variant in both), in points.\n")
    rd = " run diff |" if same else ""
    rds = "---:|" if same else ""

    def run_diff(row):
        return f" {num(row.get('max_run_diff'))} |" if same else ""

    L.append("## Grid (T=4, alpha=0.7)\n")
    L.append("| train_subset | budget | student | Lathe base % | Lathe KD % | Lathe gain (pt) | PyTorch base % | "
             "PyTorch KD % | PyTorch gain (pt) | diff | agree |" + rd)
    L.append("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|" + rds)
    for g in r["grid"]:
        l, p = g["lathe"], g["torch"]
        L.append(f"| {g['subset']} | {BUDGET_LABEL[g['budget']]} | {g['student']} | {num(l and l['base'])} | "
                 f"{num(l and l['kd'])} | {fmt(l)} | {num(p and p['base'])} | {num(p and p['kd'])} | {fmt(p)} | "
                 f"{num(g['diff'])} | {'n/a' if g['agree'] is None else 'yes' if g['agree'] else 'NO'} |" + run_diff(g))
    b = r["best_regime"]
    if b and r["sweep"]:
        why = "given by --regime" if b.get("given") else "the grid's largest Lathe gain"
        L.append(f"\n## T x alpha at n={b['subset']}, {BUDGET_LABEL[b['budget']]}, {b['student']} ({why})\n")
        L.append("| T | alpha | Lathe gain (pt) | PyTorch gain (pt) | diff | agree |" + rd)
        L.append("|---:|---:|---:|---:|---:|---|" + rds)
        for s in r["sweep"]:
            L.append(f"| {s['temperature']:g} | {s['alpha']:g} | {fmt(s['lathe'])} | {fmt(s['torch'])} | "
                     f"{num(s['diff'])} | {'n/a' if s['agree'] is None else 'yes' if s['agree'] else 'NO'} |" + run_diff(s))
    bt = r["best_T_alpha"]
    if bt and r["extras"]:
        L.append(f"\n## Feature distillation and augmentation (T={bt['temperature']:g}, alpha={bt['alpha']:g})\n")
        L.append("| variant | Lathe vs logit KD (pt) | PyTorch vs logit KD (pt) | same sign | Lathe vs baseline | "
                 "PyTorch vs baseline |" + rd)
        L.append("|---|---:|---:|---|---:|---:|" + rds)
        for e in r["extras"]:
            L.append(f"| {e['variant']} | {fmt3(e['lathe']['vs_logit_kd'])} | {fmt3(e['torch']['vs_logit_kd'])} | "
                     f"{'yes' if e['same_sign'] else 'NO'} | {fmt3(e['lathe']['vs_baseline'])} | "
                     f"{fmt3(e['torch']['vs_baseline'])} |" + run_diff(e))
    if r.get("preset"):
        pr = r["preset"]
        L.append(f"\n## The preset\n\n`{pr['file']}` with this teacher, 3 seeds (KD against the same file with "
                 f"distill.teacher=\"\"): gain {pr['mean']:+.2f} ± {pr['sd']:.2f} pt "
                 f"(per seed {', '.join(f'{g:+.2f}' for g in pr['gains'])}).\n")
    if r.get("investigations"):
        ns = r["investigations"][0].get("more_seeds", 10)
        L.append(f"\n## Cells that disagreed with {len(r['seeds'])} seeds: {ns} seeds, and Lathe from PyTorch's initial weights\n")
        L.append(f"| regime | T | alpha | Lathe gain, {ns} seeds | PyTorch gain, {ns} seeds | diff | agree | "
                 "same init: Lathe gain | same init: PyTorch gain | same init: largest per-run diff (pt) |")
        L.append("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|")
        for v in r["investigations"]:
            g3 = next((g["torch"] for g in r["grid"] if (g["subset"], g["budget"], g["student"]) ==
                       (v["subset"], v["budget"], v["student"])), None)
            if (v["temperature"], v["alpha"]) != (4.0, 0.7):
                g3 = next((s["torch"] for s in r["sweep"] if (s["temperature"], s["alpha"]) ==
                           (v["temperature"], v["alpha"])), None)
            s10 = v["seeds10"]
            L.append(f"| n={v['subset']} {BUDGET_LABEL[v['budget']]} {v['student']} | {v['temperature']:g} | "
                     f"{v['alpha']:g} | {fmt(s10['lathe'])} | {fmt(s10['torch'])} | "
                     f"{s10['diff'] if s10['diff'] is not None else float('nan'):.2f} | "
                     f"{'yes' if s10['agree'] else 'NO'} | {fmt(v['same_init']['lathe_gain'])} | {fmt(g3)} | "
                     f"{v['same_init']['max_abs_run_diff']:.2f} |")
    L.append(f"\nWall time {r['wall_s'] / 60:.1f} min.\n")
    md = "\n".join(L)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(md)
    html = ["<!doctype html><meta charset=utf-8><title>Distillation study</title>",
            "<style>table{border-collapse:collapse}td,th{border:1px solid #999;padding:2px 6px}</style>"]
    for line in L:
        if line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            html.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        elif line.startswith("|---"):
            continue
        elif line.startswith("#"):
            html.append("</table>" + f"<h2>{line.lstrip('# ').strip()}</h2><table>")
        elif line.strip():
            html.append(f"<p>{line}</p>")
    html.append("</table>")
    with open(os.path.join(out, "report.html"), "w") as f:
        f.write("\n".join(html))
    print(md)


if __name__ == "__main__":
    sys.exit(main())
