#!/usr/bin/env bash
# The four ONNX exports of the cnn (issue 18): f32 and INT8 QDQ from one quantizing run,
# structured-pruned (50% channels) and unstructured-pruned (80%, dense with its zeros), each trained
# 1 epoch on 20000 images; then, when the peers venv exists, bench/peers/onnx_check.py runs every
# file in ONNX Runtime against Lathe's logits (the INT8 file against Lathe's INT8 model) and this
# prints one line per file: checker, bytes, top-1 agreement, max |ORT - Lathe|, both accuracies.
#   bench/onnx_exports.sh [OUT_DIR]   (default /tmp/lathe-onnx-exports; ~15 min on 2 busy cores)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/lathe-onnx-exports}
cli=build/app/lathe-cli
db="$out/exports.db"
py=${LATHE_PEERS_PYTHON:-$HOME/.cache/lathe/peers-venv/bin/python}
mkdir -p "$out"
train=${LATHE_EXPORTS_TRAIN_SUBSET:-20000}  # a quick try: LATHE_EXPORTS_TRAIN_SUBSET=512 LATHE_EXPORTS_TEST_SUBSET=500
test=${LATHE_EXPORTS_TEST_SUBSET:-0}
base="\"model\": {\"zoo\": \"cnn\"}, \"train\": {\"epochs\": 1}, \"output\": {\"onnx\": true},
  \"data\": {\"train_subset\": $train, \"test_subset\": $test}"
declare -A cfg=(
  [cnn-int8]="{\"name\": \"cnn-int8\", $base, \"quant\": {\"mode\": \"ptq-static\"}}"
  [cnn-structured]="{\"name\": \"cnn-structured\", $base, \"prune\": {\"method\": \"l1-structured\", \"ratio\": 0.5}}"
  [cnn-unstructured80]="{\"name\": \"cnn-unstructured80\", $base, \"prune\": {\"method\": \"l1-unstructured\", \"ratio\": 0.8}}"
)
declare -A dir
for name in cnn-int8 cnn-structured cnn-unstructured80; do
  echo "${cfg[$name]}" >"$out/$name.json"
  echo "== $name" >&2
  dir[$name]=$("$cli" run "$out/$name.json" --db "$db" --json | python3 -c '
import json, sys
for line in sys.stdin:
    j = json.loads(line)
    if j.get("event") == "started":
        print(j["run_dir"])
')
done
files=("${dir[cnn-int8]}/model.onnx"
       "${dir[cnn-structured]}/model.onnx"
       "${dir[cnn-unstructured80]}/model.onnx"
       "${dir[cnn-int8]}/model_int8.onnx@${dir[cnn-int8]}/model.onnx@${dir[cnn-int8]}/model_int8.safetensors")
if [[ ! -x $py ]]; then
  echo "no peers venv ($py): files written, ONNX Runtime check skipped (bench/peers/setup-venv.sh makes it)" >&2
  printf '%s\n' "${files[@]}"
  exit 0
fi
"$py" bench/peers/onnx_check.py --lathe build/bench/onnx_logits "${files[@]}" | tee "$out/check.jsonl" | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    r["kind"] = "int8-qdq" if r["lathe_int8"] else "f32"
    r["run"] = r["file"].rsplit("/", 2)[-2]
    print("{run:>24} {kind:8} checker={checker} bytes={bytes} top1={top1_agreement:.4f} max_abs={max_abs_diff:.3g} "
          "rel_to_max_logit={rel_to_max_logit:.3g} lathe={lathe_accuracy:.4f} ort={ort_accuracy:.4f}".format(**r))
'
