#!/usr/bin/env bash
# Runs the Fashion-MNIST acceptance experiments of the compression issues (5: pruning and
# distillation, 6: INT8 and mixed precision) on this machine and prints the figures they are judged
# by. Every run is recorded in one store (compare them in the app or with lathe-cli compare); each
# run's final JSON line is kept in OUT/<preset>.json. Takes ~40 min on 2 cores.
#   bench/acceptance.sh [OUT_DIR] [which...]   (default /tmp/lathe-acceptance; which: prune quant precision distill sweep)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/lathe-acceptance}
shift || true
which=${*:-prune quant precision distill sweep}
cli=build/app/lathe-cli
db="$out/acceptance.db"
mkdir -p "$out"

run() {  # run PRESET [--set k=v ...]: the run's final JSON line into OUT/PRESET.json
  local preset=$1
  shift
  echo "== $preset $*" >&2
  "$cli" run "experiments/$preset.json" --db "$db" --json "$@" | tail -n 1 >"$out/$preset.json"
}
show() {  # show PRESET METRIC...: the run's final values
  python3 - "$out/$1.json" "${@:2}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
m = d.get("metrics", {})
print(sys.argv[1].rsplit("/", 1)[-1][:-5], " ".join(f"{k}={m[k]:.6g}" if k in m else f"{k}=?" for k in sys.argv[2:]))
PY
}

for w in $which; do
  case $w in
    prune)
      run prune-agp80
      show prune-agp80 dense/test_accuracy pruned_before_finetune/test_accuracy pruned/test_accuracy prune/accuracy_drop_pt \
        prune/sparsity model/dense_bytes model/bytes prune/bytes_ratio latency/dense/b256_ms latency/pruned/b256_ms
      run prune-structured
      show prune-structured dense/test_accuracy pruned/test_accuracy prune/accuracy_drop_pt prune/flops_ratio \
        model/dense_bytes model/bytes latency/dense/b256_ms latency/pruned/b256_ms prune/speedup_b256
      run prune-nm24
      show prune-nm24 dense/test_accuracy pruned/test_accuracy prune/accuracy_drop_pt prune/sparsity model/bytes
      ;;
    quant)
      run quant-compare
      show quant-compare quant/f32_test_accuracy quant/minmax/test_accuracy quant/percentile/test_accuracy \
        quant/entropy/test_accuracy quant/mse/test_accuracy model/f32_bytes model/int8_bytes quant/bytes_ratio \
        throughput/f32/b256_samples_per_s throughput/int8/b256_samples_per_s quant/speedup_b256 quant/speedup_b1
      run quant-qat
      show quant-qat quant/f32_test_accuracy quant/ptq_test_accuracy qat_fake_quant/test_accuracy quant/test_accuracy
      run quant-mixed
      show quant-mixed quant/f32_test_accuracy quant/mixed/points quant/mixed/f32_layers quant/mixed/goal_met \
        quant/test_accuracy model/bytes
      ;;
    precision)
      run cnn
      show cnn test/accuracy train/samples_per_s
      run precision-bf16-cnn
      show precision-bf16-cnn test/accuracy train/samples_per_s train/precision_emulated
      run mlp
      show mlp test/accuracy train/samples_per_s
      run precision-f16-mlp
      show precision-f16-mlp test/accuracy train/samples_per_s train/loss_scale train/skipped_steps
      echo "== precision_train (f32 / bf16 / f16 speed in one process)" >&2
      build/bench/precision_train --models mlp,cnn --rounds 3
      ;;
    distill)
      python3 bench/distill_seeds.py --cli "$cli" --db "$db" --out "$out/distill.json"
      ;;
    sweep)
      echo "== density_sweep" >&2
      build/bench/density_sweep
      echo "== structured_speedup" >&2
      build/bench/structured_speedup cnn
      ;;
    *) echo "acceptance.sh: unknown part '$w' (prune quant precision distill sweep)" >&2; exit 2 ;;
  esac
done
