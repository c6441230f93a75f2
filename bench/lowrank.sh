#!/usr/bin/env bash
# The low-rank acceptance run (issue 13): experiments/mlp-lowrank.json on full Fashion-MNIST, then
# the figures it is judged by, all from that one run: dense vs factored accuracy, bytes and latency
# at batch 1 and 256, with the ratios. Run it alone: on a machine shared with other jobs, OpenMP's
# barriers wait for descheduled threads and medians jump 20-60x (others= below says how busy the
# machine was); OMP_NUM_THREADS=1 then gives comparable figures (same accuracy here). ~40 s with one
# thread on the 2-core development machine.
#   [OMP_NUM_THREADS=1] bench/lowrank.sh [OUT_DIR] [--set k=v ...]   (default /tmp/lathe-lowrank)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/lathe-lowrank}
shift || true
mkdir -p "$out"
build/app/lathe-cli --db "$out/lowrank.db" run experiments/mlp-lowrank.json --json "$@" | tail -n 1 >"$out/mlp-lowrank.json"
python3 - "$out/mlp-lowrank.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])).get("metrics", {})
def v(k):
    return m.get(k, float("nan"))
ranks = " ".join(f"{k.split('/')[-1]}={int(m[k])}" for k in sorted(m) if k.startswith("lowrank/rank/"))
print(f"accuracy  dense {v('dense/test_accuracy'):.4f}  lowrank {v('lowrank/test_accuracy'):.4f}  "
      f"drop {v('lowrank/accuracy_drop_pt'):.2f} pt (target <= 0.5)")
print(f"ranks     {ranks}")
print(f"bytes     dense {int(v('model/dense_bytes'))}  lowrank {int(v('model/bytes'))}  file ratio {v('lowrank/bytes_ratio'):.3f}"
      f"  weights ratio {v('lowrank/weight_bytes_ratio'):.3f}  params ratio {v('lowrank/params_ratio'):.3f}")
for b in ("1", "256"):
    print(f"b{b:<4}     dense {v(f'latency/dense/b{b}_ms'):.4f} ms  lowrank {v(f'latency/lowrank/b{b}_ms'):.4f} ms  "
          f"speedup {v(f'lowrank/speedup_b{b}'):.2f}x  others={v(f'latency/lowrank/b{b}_others_cpu_share'):.2f}")
PY
