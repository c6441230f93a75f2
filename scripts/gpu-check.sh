#!/usr/bin/env bash
# gpu-check.sh: everything a lent GPU machine should run, in one device command: a fresh CUDA build
# for sm_90 (only test_gpu, gpu_bench, precision_train), `ctest -L gpu`, the GPU benchmarks, the card's
# read-only queries. Every step has its own time budget; together they stay under 480 s, so the check
# fits one 600 s command and can run twice in 15 minutes of device time. After each step it rewrites
# $OUT/summary.txt (device, driver, CUDA runtime, cuDNN, NCCL, peak TFLOP/s measured and its share of
# the device's datasheet peak from resources/device_peaks.json, the datasheet entry, each step's
# status, test counts), so a step that times out still leaves the summary; logs go to $OUT too (at
# most 7 files: setup.log build.log ctest.log bench.log gpu_bench.csv nvidia-smi.log summary.txt).
# Exit code: 0 when every step ran and no test failed.
#
# Usage (from the repository root):
#   scripts/gpu-check.sh                    the check, on the GPU machine
#   scripts/gpu-check.sh --dry-run [BUILD]  everything but running on a device, on any machine (CI):
#       the budgets, the tools, the carried .gpu-deps (unpacked and checked), a real configure with the
#       check's flags in a temporary folder, the targets it would build; with BUILD (a finished build
#       folder) also that the binaries it would run exist and start (test_gpu lists its tests,
#       gpu_bench --versions, ctest -N -L gpu). Takes seconds beyond the build.
#   LATHE_GPU_BUILD=/tmp/lathe-gpu-build  build folder (emptied first unless LATHE_GPU_KEEP_BUILD=1)
#   LATHE_GPU_JOBS=16                     build parallelism
#   LATHE_CUDA_ARCH=90                    CMAKE_CUDA_ARCHITECTURES
# cuDNN / NCCL: taken from the CUDA toolkit, else from python3's nvidia-cudnn-cu13 / nvidia-nccl-cu13
# wheels. Build dependencies (oneDNN, SQLite, GTest, nlohmann-json, CLI11, zlib) must be installed;
# if they are not, the Debian packages that scripts/fetch-gpu-deps.sh put in .gpu-deps/ (ignored by
# git, named in the tool's carry) are unpacked to /tmp/lathe-deps and used from there.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DRY=0
DRY_BUILD=""
if [ "${1:-}" = --dry-run ]; then
  DRY=1
  DRY_BUILD=${2:-}
  [ -n "$DRY_BUILD" ] && DRY_BUILD=$(cd "$DRY_BUILD" 2>/dev/null && pwd || echo "$DRY_BUILD")
elif [ $# -gt 0 ]; then
  echo "usage: scripts/gpu-check.sh [--dry-run [BUILD]]" >&2
  exit 2
fi
JOBS=${LATHE_GPU_JOBS:-16}
ARCH=${LATHE_CUDA_ARCH:-90}
if [ $DRY = 1 ]; then
  SCRATCH=$(mktemp -d /tmp/gpu-check-dry.XXXXXX)
  trap 'rm -rf "$SCRATCH"' EXIT
  BUILD=$SCRATCH/build
  DEPS=$SCRATCH/deps
  LOGS=${OUT:-$SCRATCH/logs}
else
  BUILD=${LATHE_GPU_BUILD:-/tmp/lathe-gpu-build}
  DEPS=/tmp/lathe-deps
  LOGS=${OUT:-/tmp/lathe-gpu-logs}
fi
mkdir -p "$LOGS"
SUMMARY=$LOGS/summary.txt
T0=$(date +%s)
elapsed() { echo $(($(date +%s) - T0)); }
log() { echo "[gpu-check +$(elapsed)s] $*"; }

# ---------------------------------------------------------------- budgets
# Seconds per step. The sum must stay under TOTAL (checked below, and by --dry-run in CI); a step also
# never runs past what is left of TOTAL.
TOTAL=480
STEPS=(deps configure build tests bench train card)
declare -A BUDGET=([deps]=20 [configure]=45 [build]=180 [tests]=140 [bench]=50 [train]=25 [card]=10)
declare -A STATUS
for s in "${STEPS[@]}"; do STATUS[$s]="not run"; done
budget_sum=0
for s in "${STEPS[@]}"; do budget_sum=$((budget_sum + BUDGET[$s])); done

device=""; driver=""; versions=""; peak=""; datasheet=""
tests_passed=0; tests_failed=0; tests_skipped=0

write_summary() {
  {
    echo "gpu-check summary ($([ $DRY = 1 ] && echo "dry run, no device" || echo "device run"), $(elapsed) s of $TOTAL s budget)"
    echo "date:     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit:   $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "device:   ${device:-?}"
    echo "driver:   ${driver:-?}"
    echo "versions: ${versions:-?}"
    echo "peak:     ${peak:-? (not measured)}"
    echo "datasheet: ${datasheet:-? (gpu_bench did not say)}"
    for s in "${STEPS[@]}"; do printf "step %-10s %s (budget %d s)\n" "$s" "${STATUS[$s]}" "${BUDGET[$s]}"; done
    # Worded so that a dry run's zeros cannot be read as a test runner's closing line.
    echo "gpu tests (passed / failed / skipped): $tests_passed / $tests_failed / $tests_skipped"
  } >"$SUMMARY.tmp" && mv "$SUMMARY.tmp" "$SUMMARY"
}

# run_step NAME LOGFILE COMMAND...: runs COMMAND under the step's budget (or what is left of TOTAL),
# appends its output to LOGFILE, records ok / FAILED (rc) / TIMEOUT, rewrites the summary.
run_step() {
  local name=$1 logfile=$2
  shift 2
  local left=$((TOTAL - $(elapsed)))
  local t=${BUDGET[$name]}
  [ "$left" -lt "$t" ] && t=$left
  if [ "$t" -lt 3 ]; then
    STATUS[$name]="SKIPPED (no time left of $TOTAL s)"
    write_summary
    return 1
  fi
  log "$name (up to $t s)"
  echo "==== $name: $*" >>"$logfile"
  timeout --kill-after=5 "$t" "$@" >>"$logfile" 2>&1
  local rc=$?
  case $rc in
    0) STATUS[$name]="ok ($(elapsed) s)" ;;
    124 | 137) STATUS[$name]="TIMEOUT after $t s" ;;
    *) STATUS[$name]="FAILED (exit $rc)" ;;
  esac
  write_summary
  return $rc
}
ok() { [[ ${STATUS[$1]} == ok* ]]; }

write_summary
if [ "$budget_sum" -ge "$TOTAL" ]; then
  echo "gpu-check: the step budgets sum to $budget_sum s, not under $TOTAL s" | tee -a "$SUMMARY"
  exit 1
fi
log "step budgets: $budget_sum s of $TOTAL s"

# ---------------------------------------------------------------- tools
missing=()
for tool in cmake ninja timeout git python3; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
ls "$ROOT"/.gpu-deps/*.deb >/dev/null 2>&1 && { command -v dpkg >/dev/null 2>&1 || missing+=(dpkg); }
if [ ${#missing[@]} -gt 0 ]; then
  echo "gpu-check: missing tools: ${missing[*]}" | tee -a "$SUMMARY"
  exit 1
fi
for f in scripts/fetch-gpu-deps.sh tests/CMakeLists.txt bench/gpu/gpu_bench.cpp cmake/Cuda.cmake; do
  [ -e "$ROOT/$f" ] || { echo "gpu-check: $ROOT/$f is missing" | tee -a "$SUMMARY"; exit 1; }
done

# ---------------------------------------------------------------- dependencies
SETUP_LOG=$LOGS/setup.log
: >"$SETUP_LOG"
CMAKE_EXTRA=()
if ls "$ROOT"/.gpu-deps/*.deb >/dev/null 2>&1; then
  log "unpacking $(ls "$ROOT"/.gpu-deps/*.deb | wc -l) carried .deb files to $DEPS"
  if run_step deps "$SETUP_LOG" bash -c "bash '$ROOT/scripts/fetch-gpu-deps.sh' --unpack '$DEPS' &&
                                         bash '$ROOT/scripts/fetch-gpu-deps.sh' --check '$DEPS'"; then
    export CMAKE_PREFIX_PATH=$DEPS/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
    export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    # libgomp only where the machine has none (an older one in front would shadow the compiler's).
    if ! ldconfig -p 2>/dev/null | grep -q 'libgomp\.so\.1 '; then
      export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$DEPS-fallback/usr/lib/x86_64-linux-gnu
      echo "libgomp.so.1 from the fallback package" >>"$SETUP_LOG"
    fi
  fi
else
  STATUS[deps]="ok (none carried: installed packages used)"
fi
NVCC=${CUDACXX:-/usr/local/cuda/bin/nvcc}
[ -x "$NVCC" ] || NVCC=$(command -v nvcc || true)
[ -n "$NVCC" ] && CMAKE_EXTRA+=("-DCMAKE_CUDA_COMPILER=$NVCC")
CUDA_HOME_GUESS=$(dirname "$(dirname "${NVCC:-/usr/local/cuda/bin/nvcc}")")
py_pkg_dir() { python3 -c "import $1 as m; print(list(m.__path__)[0])" 2>/dev/null; }
if [ -n "$NVCC" ] && [ ! -e "$CUDA_HOME_GUESS/include/cudnn.h" ]; then
  d=$(py_pkg_dir nvidia.cudnn) && [ -n "$d" ] && { CMAKE_EXTRA+=("-DLATHE_CUDNN_ROOT=$d"); export LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; log "cuDNN from $d"; }
fi
if [ -n "$NVCC" ] && [ ! -e "$CUDA_HOME_GUESS/include/nccl.h" ]; then
  d=$(py_pkg_dir nvidia.nccl) && [ -n "$d" ] && { CMAKE_EXTRA+=("-DLATHE_NCCL_ROOT=$d"); export LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; log "NCCL from $d"; }
fi
# cuDNN 9 loads its sub-libraries (libcudnn_cnn.so.9, ...) by name at run time.
for d in "$CUDA_HOME_GUESS/lib" "$CUDA_HOME_GUESS/lib64"; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done

# ---------------------------------------------------------------- configure and build
CUDA_MODE=ON
if [ -z "$NVCC" ]; then
  if [ $DRY = 0 ]; then
    STATUS[configure]="FAILED (no nvcc)"
  else
    CUDA_MODE=OFF  # a machine without the toolkit checks the rest of the configure
    log "no nvcc here: the dry run configures without CUDA"
  fi
fi
if [ $DRY = 0 ]; then
  if [ "${LATHE_GPU_KEEP_BUILD:-0}" = 1 ]; then rm -f "$BUILD/CMakeCache.txt"; else rm -rf "$BUILD"; fi
fi
TARGETS=(test_gpu gpu_bench precision_train)
[ "$CUDA_MODE" = OFF ] && TARGETS=(test_gpu precision_train)
if [[ ${STATUS[configure]} != FAILED* ]]; then
  run_step configure "$SETUP_LOG" cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLATHE_CUDA=$CUDA_MODE -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DLATHE_BUILD_TESTS=ON -DLATHE_BUILD_BENCH=ON \
    "${CMAKE_EXTRA[@]}"
  ok configure || { tail -30 "$SETUP_LOG"; echo "hint: missing build dependencies? see the header of scripts/gpu-check.sh (.gpu-deps/)"; }
fi

if ok configure; then
  if [ $DRY = 1 ]; then
    # The targets the check builds exist in the configured tree.
    run_step build "$LOGS/build.log" bash -c "ninja -C '$BUILD' -t targets all | grep -E '^($(IFS='|'; echo "${TARGETS[*]}")): ' | sort -u | tee /dev/stderr | test \$(wc -l) -eq ${#TARGETS[@]}"
  else
    run_step build "$LOGS/build.log" ninja -C "$BUILD" -j"$JOBS" "${TARGETS[@]}"
    ok build || { grep -E "error|Error" "$LOGS/build.log" | head -30; tail -10 "$LOGS/build.log"; }
  fi
fi

# ---------------------------------------------------------------- tests
count_tests() {  # ctest prints one line per test: "... Passed", "***Failed", "***Skipped" (or "Not Run").
  local f=$1
  tests_passed=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed" "$f")
  tests_failed=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|Not Run)" "$f")
  tests_skipped=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*Skipped" "$f")
}
BIN=$BUILD
[ $DRY = 1 ] && BIN=$DRY_BUILD
if [ $DRY = 1 ]; then
  if [ -n "$DRY_BUILD" ]; then
    # The binaries the check runs exist and start here (no device work: listing and version queries).
    run_step tests "$LOGS/ctest.log" bash -c "'$BIN/tests/test_gpu' --gtest_list_tests >/dev/null &&
      cd '$BIN' && ctest -N -L gpu | tail -1 && test \$(ctest -N -L gpu | grep -c 'Test *#') -gt 1"
  else
    STATUS[tests]="not checked (no build folder given)"
  fi
elif ok build; then
  run_step tests "$LOGS/ctest.log" bash -c "cd '$BUILD' && ctest -L gpu -j8 --output-on-failure --timeout 100"
  count_tests "$LOGS/ctest.log"
  write_summary
  grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|\*\*\*Timeout" "$LOGS/ctest.log" | tail -25
fi

# ---------------------------------------------------------------- benchmark
BENCH_LOG=$LOGS/bench.log
if [ $DRY = 1 ] && [ -n "$DRY_BUILD" ] && [ "$CUDA_MODE" = ON ]; then
  run_step bench "$BENCH_LOG" "$BIN/bench/gpu_bench" --versions
  run_step train "$BENCH_LOG" test -x "$BIN/bench/precision_train"
elif [ $DRY = 1 ]; then
  if [ "$CUDA_MODE" = OFF ]; then STATUS[bench]="not checked (no nvcc here: no gpu_bench)"; else STATUS[bench]="not checked (no build folder given)"; fi
elif ok build; then
  run_step bench "$BENCH_LOG" "$BUILD/bench/gpu_bench" --reps 20 --csv "$LOGS/gpu_bench.csv"
  # Mixed-precision training on the GPU (bf16/f16 tensor cores vs f32; synthetic data: the lent
  # machine has no Fashion-MNIST). Informative: a failure here does not fail the check.
  run_step train "$BENCH_LOG" "$BUILD/bench/precision_train" --backend cuda --synthetic 1 --models mlp,cnn \
    --rounds 3 --steps 30
fi
if [ -s "$BENCH_LOG" ]; then
  v=$(grep -m1 '^versions: ' "$BENCH_LOG" | cut -d' ' -f2-) && [ -n "$v" ] && versions=$v
  p=$(grep -m1 '^peak: ' "$BENCH_LOG" | cut -d' ' -f2-) && [ -n "$p" ] && peak=$p
  d=$(grep -m1 '^device: ' "$BENCH_LOG" | cut -d' ' -f2-) && [ -n "$d" ] && device=$d
  d=$(grep -m1 '^datasheet: ' "$BENCH_LOG" | cut -d' ' -f2-) && [ -n "$d" ] && datasheet=$d
  write_summary
fi

# ---------------------------------------------------------------- the card (read-only queries)
SMI_LOG=$LOGS/nvidia-smi.log
if command -v nvidia-smi >/dev/null 2>&1 && [ $DRY = 0 ]; then
  run_step card "$SMI_LOG" bash -c "nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv"
  q=$(grep -A1 '^name, driver_version' "$SMI_LOG" | tail -1)
  if [ -n "$q" ]; then
    [ -z "$device" ] && device=${q%%,*}
    driver=$(echo "$q" | cut -d, -f2 | tr -d ' ')
  fi
  write_summary
elif [ $DRY = 1 ]; then
  STATUS[card]="not run (dry run$(command -v nvidia-smi >/dev/null 2>&1 || echo ': no nvidia-smi here'))"
else
  STATUS[card]="FAILED (nvidia-smi not found)"
fi
write_summary

# ---------------------------------------------------------------- summary (last, for the tool's tail)
echo
cat "$SUMMARY"
if [ $DRY = 0 ] && [ -s "$LOGS/bench.log" ]; then
  # op, shape, mode, ms, rate for the headline rows.
  grep -E "^(sgemm|copy d2d|conv fwd|linear fwd)" "$LOGS/bench.log" | grep -vE " find " |
    awk '{ printf "  %s\n", $0 }' | cut -c1-132
fi
echo "logs: $LOGS"
if [ $DRY = 1 ]; then
  for s in deps configure build; do ok "$s" || { echo "gpu-check --dry-run: step $s did not pass"; exit 1; }; done
  for s in tests bench train; do
    [[ ${STATUS[$s]} == FAILED* || ${STATUS[$s]} == TIMEOUT* ]] && { echo "gpu-check --dry-run: step $s did not pass"; exit 1; }
  done
  echo "gpu-check --dry-run: ok"
  exit 0
fi
for s in deps configure build tests bench; do ok "$s" || exit 1; done
exit 0
