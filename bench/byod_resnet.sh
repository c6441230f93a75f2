#!/usr/bin/env bash
# Issue 18's bring-your-own acceptance run: a 3-channel 32x32 image folder and the same data as .npz
# (bench/peers/make_byod_data.py: Fashion-MNIST padded and tinted) with the PyTorch-exported
# ResNet-style ONNX model (bench/peers/torch_resnet_onnx.py --channels 3 --size 32, trained in
# PyTorch on that .npz). Steps, each timed (CPU seconds user+sys):
#   1. the data, TRAIN training images (the first TRAIN of Fashion-MNIST's 60000) and all 10000 test
#   2. PyTorch: 1 epoch on it, its test accuracy, exported as ONNX
#   3. Lathe's test accuracy on the imported file before training (build/bench/onnx_logits --npz),
#      which must equal PyTorch's within 0.05 pt
#   4. lathe-cli: 1 epoch from the imported weights on the folder and on the .npz (same seed, same
#      split sizes), whose test accuracy and losses must be equal to the last digit
#   5. lathe-cli on the .npz: 1 epoch, then structured pruning 30% (L1, 1 fine-tuning epoch); and
#      1 epoch, then INT8 PTQ (static, min-max): each must end 'finished' with its metrics
# and prints the figures as `key: value` lines, exiting 1 when a check fails.
#   bench/byod_resnet.sh [OUT_DIR]   (default /tmp/lathe-byod-resnet; TRAIN=10000, TEST=10000, THREADS=1;
#   the four lathe-cli runs go two at a time)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/lathe-byod-resnet}
train=${TRAIN:-10000}
test=${TEST:-10000}  # a quick try: TRAIN=300 TEST=500
threads=${THREADS:-1}
cli=build/app/lathe-cli
logits=build/bench/onnx_logits
py=${LATHE_PEERS_PYTHON:-$HOME/.cache/lathe/peers-venv/bin/python}
db="$out/byod.db"
for f in "$cli" "$logits" "$py"; do
  [[ -x $f ]] || { echo "byod_resnet.sh: $f missing (build lathe-cli and onnx_logits; bench/peers/setup-venv.sh)" >&2; exit 2; }
done
mkdir -p "$out"
rm -f "$db" "$db"-wal "$db"-shm
export OMP_NUM_THREADS=$threads
TIMEFORMAT='%U %S'
cpu() {  # cpu NAME CMD...: runs CMD, appends "NAME user+sys" to $out/cpu.txt
  local name=$1 t
  shift
  { t=$( { time "$@" >"$out/$name.out" 2>"$out/$name.err"; } 2>&1 ); } || {
    echo "byod_resnet.sh: $name failed:" >&2; tail -20 "$out/$name.err" >&2; exit 1; }
  awk -v n="$name" '{printf "%s %.1f\n", n, $1 + $2}' <<<"$t" >>"$out/cpu.txt"
}
: >"$out/cpu.txt"
echo "load before: $(uptime)"

rm -rf "$out/fashion32" "$out/runs"  # a folder left by a larger try would add files
cpu data "$py" bench/peers/make_byod_data.py --out "$out" --train "$train" --test "$test"
cpu pytorch "$py" bench/peers/torch_resnet_onnx.py --channels 3 --size 32 --npz "$out/fashion32.npz" \
  --out "$out/resnet32.onnx" --epochs 1 --threads "$threads"
cpu imported "$logits" "$out/resnet32.onnx" "$out/imported" --npz "$out/fashion32.npz"
rm -f "$out/imported.inputs.f32" "$out/imported.logits.f32"

model="\"model\": {\"onnx\": \"$out/resnet32.onnx\"}"
npz="\"dataset\": \"npz\", \"path\": \"$out/fashion32.npz\""
folder="\"dataset\": \"folder\", \"path\": \"$out/fashion32\", \"image_size\": 32, \"channels\": 3"
train_cfg="\"seed\": 1, \"train\": {\"epochs\": 1}, \"output\": {\"dir\": \"$out/runs\"}"
echo "{\"name\": \"byod-folder\", $model, $train_cfg, \"data\": {$folder}}" >"$out/folder.json"
echo "{\"name\": \"byod-npz\", $model, $train_cfg, \"data\": {$npz}}" >"$out/npz.json"
echo "{\"name\": \"byod-prune30\", $model, $train_cfg, \"data\": {$npz},
  \"prune\": {\"method\": \"l1-structured\", \"ratio\": 0.3, \"finetune_epochs\": 1}}" >"$out/prune.json"
echo "{\"name\": \"byod-int8\", $model, $train_cfg, \"data\": {$npz}, \"quant\": {\"mode\": \"ptq-static\"}}" \
  >"$out/int8.json"
for pair in "folder npz" "prune int8"; do
  pids=()
  for run in $pair; do
    cpu "lathe-$run" "$cli" --db "$db" run "$out/$run.json" --json &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || exit 1; done
done
for run in byod-folder byod-npz byod-prune30 byod-int8; do
  "$cli" --db "$db" show "$run" --json >"$out/$run.show.json"
done
echo "load after: $(uptime)"

python3 - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
def last(line_file):
    with open(line_file) as f:
        return [json.loads(l) for l in f if l.strip().startswith("{")][-1]
torch = last(f"{out}/pytorch.out")
data = last(f"{out}/data.out")
imp = last(f"{out}/imported.out")
show = {r: json.load(open(f"{out}/byod-{r}.show.json")) for r in ("folder", "npz", "prune30", "int8")}
def metric(r, name):
    m = show[r]["metrics"].get(name)
    return None if m is None else m["last"]
cpu = dict(l.split() for l in open(f"{out}/cpu.txt"))
ok = True
def check(name, cond):
    global ok
    ok = ok and cond
    print(f"check {name}: {'ok' if cond else 'FAILED'}")
print(f"data: {data['train']} train / {data['test']} test images, {data['shape']}, {data['png_files']} PNG files, "
      f"npz {data['npz_bytes']} bytes")
print(f"pytorch: 1 epoch on {torch['train_samples']}, test accuracy {torch['pytorch_test_accuracy']:.4f} "
      f"(torch {torch['torch']}), normalisation {torch['normalisation']}, ops {torch['ops']}")
print(f"lathe imported (before training): test accuracy {imp['accuracy']:.4f} on {imp['n']} images, "
      f"normalisation {imp['normalisation']}")
diff_pt = abs(imp["accuracy"] - torch["pytorch_test_accuracy"]) * 100
check(f"imported accuracy within 0.05 pt of PyTorch's (diff {diff_pt:.3f} pt)", diff_pt <= 0.05)
for r in ("folder", "npz"):
    print(f"lathe 1 epoch on {r}: status {show[r]['status']}, test accuracy {metric(r, 'test/accuracy')!r}, "
          f"test loss {metric(r, 'test/loss')!r}, train loss {metric(r, 'train/loss')!r}")
check("folder and npz runs finished", show["folder"]["status"] == show["npz"]["status"] == "finished")
check("folder and npz equal to the last digit (test accuracy, test loss, train loss)",
      all(metric("folder", m) == metric("npz", m) is not None for m in ("test/accuracy", "test/loss", "train/loss")))
print(f"lathe prune l1-structured 30%: status {show['prune30']['status']}, accuracy drop "
      f"{metric('prune30', 'prune/accuracy_drop_pt')!r} pt, pruned (after fine-tuning) test accuracy "
      f"{metric('prune30', 'test/accuracy')!r}, "
      f"bytes ratio {metric('prune30', 'prune/bytes_ratio')!r}, flops ratio {metric('prune30', 'prune/flops_ratio')!r}")
check("structured pruning finished", show["prune30"]["status"] == "finished"
      and metric("prune30", "prune/bytes_ratio") is not None)
print(f"lathe INT8 PTQ: status {show['int8']['status']}, f32 test accuracy {metric('int8', 'quant/f32_test_accuracy')!r}, "
      f"INT8 test accuracy {metric('int8', 'quant/test_accuracy')!r}, drop {metric('int8', 'quant/accuracy_drop')!r}, "
      f"bytes ratio {metric('int8', 'quant/bytes_ratio')!r}")
check("INT8 PTQ finished", show["int8"]["status"] == "finished" and metric("int8", "quant/test_accuracy") is not None)
print("cpu seconds (user+sys): " + ", ".join(f"{k} {v}" for k, v in cpu.items()))
sys.exit(0 if ok else 1)
EOF
