#!/usr/bin/env bash
# Redoes the README screenshots (docs/screenshots/) from a real store: a prune + INT8 run of the
# MLP (its overview and the main window watching it), a learning-rate sweep of three runs, each
# named by its value (Compare, curves), and issue 17's study, experiments/sweeps/mlp-prune-study.json
# (the mlp pruned at 4 ratios x 3 seeds, run by `lathe-cli sweep --jobs 1` with training and
# fine-tuning cut as tests/e2e/cli_study_test.cpp cuts them): its 4 groups (Compare, Groups), what
# matters for test accuracy, and the parallel coordinates of its 12 runs (`lathe --sweep`); and a
# data-parallel run on 2 CPU ranks, spot-simulated, in the Live tab (its per-rank charts, the
# communication share and the interruption markers).
# Small runs (train_subset) keep it to a few minutes.
# Nothing of this machine shows: the store is opened by a relative path from a scratch folder,
# the designer names its preset by the repository folder, and the runs record the host name
# "workstation" (set in a private UTS namespace with unshare when allowed, else the real one).
# Usage: scripts/readme-screenshots.sh [BUILD_DIR]   (default: build)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$repo/build}" && pwd)
cli=$build/app/lathe-cli
gui=$build/app/gui/lathe
out=$repo/docs/screenshots
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# Runs as lathe-cli would on a user's workstation: same binary, its host name neutral.
as_workstation() {
  if unshare -u true 2>/dev/null; then
    unshare -u sh -c 'hostname workstation && exec "$@"' sh "$@"
  else
    echo "readme-screenshots: unshare not allowed; the runs record this machine's host name" >&2
    "$@"
  fi
}
small=(--db lathe.db --set output.dir=runs --set data.train_subset=8192 --set data.test_subset=2000
       --set train.epochs=2)

as_workstation "$cli" run "$repo/experiments/mlp.json" "${small[@]}" --set 'name=mlp-fashion prune+int8' \
  --set prune.method=l1-unstructured --set prune.ratio=0.7 --set prune.finetune_epochs=1 \
  --set quant.mode=ptq-static --set quant.calib_samples=512
for lr in 0.01 0.05 0.2; do  # three epochs: three test points per curve
  as_workstation "$cli" run "$repo/experiments/mlp.json" "${small[@]}" --set "name=mlp-fashion lr=$lr" \
    --set "train.optimizer.lr=$lr" --set train.epochs=3
done
# 2 ranks on a simulated spot instance: 900 interruptions an hour, each announced 5 s ahead (the
# notice checkpoints, the supervisor starts the ranks again 0.5 s later); seed 3 draws the first
# one 0.8 s in (as tests/e2e CliSpot), so a run of a few seconds is interrupted a few times.
as_workstation "$cli" run "$repo/experiments/mlp.json" "${small[@]}" --set 'name=mlp-fashion 2 ranks spot' \
  --set compute.devices=2 --set seed=3 --set train.epochs=3 --set train.batch_size=32 \
  --set checkpoint.every_steps=50 --set cost.interruptions_per_hour=900 --set cost.restart_s=0.5 \
  --set cost.notice_s=5
# The study: 12 runs named "mlp-prune ratio=R seed=S", one at a time (child lathe-cli runs, which
# inherit the host name), shortened as the e2e study test shortens it.
as_workstation "$cli" --db lathe.db sweep "$repo/experiments/sweeps/mlp-prune-study.json" --jobs 1 \
  --set output.dir=runs --set train.epochs=1 --set prune.finetune_epochs=1 --set data.train_subset=512 \
  --set data.test_subset=256

id_of() { "$cli" --db lathe.db list --json | python3 -c "import json,sys; print(next(r['id'] for r in json.load(sys.stdin)['runs'] if r['name'] == sys.argv[1]))" "$1"; }
pruned=$(id_of 'mlp-fashion prune+int8')
dpspot=$(id_of 'mlp-fashion 2 ranks spot')
sweep="$(id_of 'mlp-fashion lr=0.01'),$(id_of 'mlp-fashion lr=0.05'),$(id_of 'mlp-fashion lr=0.2')"
study=$("$cli" --db lathe.db list --sweep mlp-prune-study --status finished --limit 0 --json |
  python3 -c "import json,sys; ids=[r['id'] for r in json.load(sys.stdin)['runs']]; assert len(ids) == 12, ids; print(','.join(ids))")

shot() { QT_QPA_PLATFORM=offscreen "$gui" --db lathe.db --size 1400x900 "$@"; }
shot --screenshot "$out/lathe-overview.png" --overview "$pruned"
shot --screenshot "$out/lathe-main.png" --watch "$pruned" --tab live --wait-ms 30000  # the cost panel measures
shot --screenshot "$out/lathe-live-dp-spot.png" --watch "$dpspot" --tab live --wait-ms 30000
shot --screenshot "$out/lathe-sweep-compare.png" --compare "$sweep" --compare-page curves
shot --screenshot "$out/lathe-compare.png" --compare "$pruned,$sweep" --compare-page scatter \
  --scatter model/bytes,test/accuracy
shot --screenshot "$out/lathe-groups.png" --compare "$study" --compare-page groups
shot --screenshot "$out/lathe-importance.png" --compare "$study" --compare-page "what matters"
shot --screenshot "$out/lathe-parallel.png" --sweep mlp-prune-study \
  --parallel 'prune.ratio,seed,last model/bytes,last test/accuracy'  # coloured by the last axis
echo "readme-screenshots: wrote $out/lathe-{overview,main,live-dp-spot,sweep-compare,compare,groups,importance,parallel}.png"
