#!/usr/bin/env bash
# gpu-check.sh: everything a lent GPU machine should run, in one call (about 4-6 minutes on 16 cores):
# a fresh CUDA build for sm_90 (only test_gpu, gpu_bench, precision_train), `ctest -L gpu`, the GPU benchmarks,
# nvidia-smi, and a short summary table printed last. Logs and the bench CSV go to $OUT (the device
# tool's return folder) or to the build folder. Exit code: 0 when every step ran and no test failed.
#
# Usage (from the repository root): scripts/gpu-check.sh
#   LATHE_GPU_BUILD=/tmp/lathe-gpu-build  build folder (emptied first unless LATHE_GPU_KEEP_BUILD=1)
#   LATHE_GPU_JOBS=16                     build parallelism
#   LATHE_CUDA_ARCH=90                    CMAKE_CUDA_ARCHITECTURES
# cuDNN / NCCL: taken from the CUDA toolkit, else from python3's nvidia-cudnn-cu13 / nvidia-nccl-cu13
# wheels. Build dependencies (oneDNN, SQLite, GTest, nlohmann-json, CLI11, zlib) must be installed;
# if they are not, Debian .deb files placed in .gpu-deps/ (ignored by git, named in the tool's carry)
# are unpacked to /tmp/lathe-deps and used from there.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${LATHE_GPU_BUILD:-/tmp/lathe-gpu-build}
JOBS=${LATHE_GPU_JOBS:-16}
ARCH=${LATHE_CUDA_ARCH:-90}
LOGS=${OUT:-$BUILD/logs}
mkdir -p "$LOGS"
T0=$(date +%s)
log() { echo "[gpu-check +$(( $(date +%s) - T0 ))s] $*"; }

status_configure="not run"; status_build="not run"; status_tests="not run"; status_bench="not run"
tests_passed=0; tests_failed=0; tests_skipped=0

# ---------------------------------------------------------------- dependencies
CMAKE_EXTRA=()
if ls "$ROOT"/.gpu-deps/*.deb >/dev/null 2>&1; then
  log "unpacking $(ls "$ROOT"/.gpu-deps/*.deb | wc -l) carried .deb files to /tmp/lathe-deps"
  mkdir -p /tmp/lathe-deps
  for f in "$ROOT"/.gpu-deps/*.deb; do dpkg -x "$f" /tmp/lathe-deps; done
  export CMAKE_PREFIX_PATH=/tmp/lathe-deps/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
  export LD_LIBRARY_PATH=/tmp/lathe-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
NVCC=${CUDACXX:-/usr/local/cuda/bin/nvcc}
[ -x "$NVCC" ] || NVCC=$(command -v nvcc || true)
[ -n "$NVCC" ] && CMAKE_EXTRA+=("-DCMAKE_CUDA_COMPILER=$NVCC")
CUDA_HOME_GUESS=$(dirname "$(dirname "${NVCC:-/usr/local/cuda/bin/nvcc}")")
py_pkg_dir() { python3 -c "import $1 as m; print(list(m.__path__)[0])" 2>/dev/null; }
if [ ! -e "$CUDA_HOME_GUESS/include/cudnn.h" ]; then
  d=$(py_pkg_dir nvidia.cudnn) && [ -n "$d" ] && { CMAKE_EXTRA+=("-DLATHE_CUDNN_ROOT=$d"); export LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; log "cuDNN from $d"; }
fi
if [ ! -e "$CUDA_HOME_GUESS/include/nccl.h" ]; then
  d=$(py_pkg_dir nvidia.nccl) && [ -n "$d" ] && { CMAKE_EXTRA+=("-DLATHE_NCCL_ROOT=$d"); export LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; log "NCCL from $d"; }
fi
# cuDNN 9 loads its sub-libraries (libcudnn_cnn.so.9, ...) by name at run time.
for d in "$CUDA_HOME_GUESS/lib" "$CUDA_HOME_GUESS/lib64"; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done

# ---------------------------------------------------------------- configure and build
if [ "${LATHE_GPU_KEEP_BUILD:-0}" = 1 ]; then rm -f "$BUILD/CMakeCache.txt"; else rm -rf "$BUILD"; fi
mkdir -p "$LOGS"
log "configure $BUILD (sm_$ARCH)"
if timeout 180 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DLATHE_BUILD_TESTS=ON -DLATHE_BUILD_BENCH=ON "${CMAKE_EXTRA[@]}" \
     >"$LOGS/configure.log" 2>&1; then
  status_configure=ok
else
  status_configure=FAILED
  tail -30 "$LOGS/configure.log"
  echo "hint: missing build dependencies? see the header of scripts/gpu-check.sh (.gpu-deps/)"
fi

if [ "$status_configure" = ok ]; then
  log "build test_gpu gpu_bench precision_train (-j$JOBS)"
  if timeout 420 ninja -C "$BUILD" -j"$JOBS" test_gpu gpu_bench precision_train >"$LOGS/build.log" 2>&1; then
    status_build=ok
  else
    status_build=FAILED
    grep -E "error|Error" "$LOGS/build.log" | head -30
    tail -10 "$LOGS/build.log"
  fi
fi

# ---------------------------------------------------------------- tests
if [ "$status_build" = ok ]; then
  log "ctest -L gpu"
  (cd "$BUILD" && timeout 300 ctest -L gpu --output-on-failure --timeout 240) >"$LOGS/ctest.log" 2>&1
  rc=$?
  # ctest prints one line per test: "... Passed", "***Failed", "***Skipped" (or "Not Run").
  tests_passed=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed" "$LOGS/ctest.log")
  tests_failed=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|Not Run)" "$LOGS/ctest.log")
  tests_skipped=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*Skipped" "$LOGS/ctest.log")
  # A gtest skip that ctest does not recognise shows as Passed; count those from gtest's own lines.
  gtest_skips=$(grep -cE "^\[  SKIPPED \] [A-Za-z0-9_]+\.[A-Za-z0-9_]+ \(" "$LOGS/ctest.log")
  if [ "$tests_skipped" -eq 0 ] && [ "$gtest_skips" -gt 0 ]; then
    tests_skipped=$gtest_skips; tests_passed=$(( tests_passed - gtest_skips ))
  fi
  if [ $rc -eq 0 ]; then status_tests=ok; else status_tests=FAILED; fi
  grep -E "tests passed|tests failed|Failed|SKIPPED|Skipped" "$LOGS/ctest.log" | tail -25
fi

# ---------------------------------------------------------------- benchmark
if [ "$status_build" = ok ]; then
  log "gpu_bench"
  if timeout 240 "$BUILD/bench/gpu_bench" --csv "$LOGS/gpu_bench.csv" >"$LOGS/gpu_bench.log" 2>&1; then
    status_bench=ok
  else
    status_bench=FAILED
  fi
  cat "$LOGS/gpu_bench.log"
  # Mixed-precision training on the GPU (bf16/f16 tensor cores vs f32; synthetic data: the lent
  # machine has no Fashion-MNIST). Informative: a failure here does not fail the check.
  log "precision_train --backend cuda"
  timeout 120 "$BUILD/bench/precision_train" --backend cuda --synthetic 1 --models mlp,cnn --rounds 3 --steps 30 \
    >"$LOGS/precision_train.log" 2>&1 || echo "precision_train failed (see $LOGS/precision_train.log)"
  cut -c1-220 "$LOGS/precision_train.log"
fi

# ---------------------------------------------------------------- the card (read-only queries)
log "nvidia-smi"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi >"$LOGS/nvidia-smi.log" 2>&1
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
    --format=csv >>"$LOGS/nvidia-smi.log" 2>&1
  tail -3 "$LOGS/nvidia-smi.log"
else
  echo "nvidia-smi not found" | tee "$LOGS/nvidia-smi.log"
fi

# ---------------------------------------------------------------- summary (last, for the tool's tail)
echo
echo "================ gpu-check summary ($(( $(date +%s) - T0 )) s) ================"
printf "%-12s %s\n" configure "$status_configure" build "$status_build" tests "$status_tests" bench "$status_bench"
printf "%-12s %d passed, %d failed, %d skipped\n" "gpu tests" "$tests_passed" "$tests_failed" "$tests_skipped"
if [ -s "$LOGS/gpu_bench.log" ]; then
  grep -E "^device:" "$LOGS/gpu_bench.log"
  # op, shape, mode, ms, rate for the headline rows.
  grep -E "^(sgemm|copy d2d|conv fwd|linear fwd)" "$LOGS/gpu_bench.log" | grep -vE " find " |
    awk '{ printf "  %s\n", $0 }' | cut -c1-120
fi
echo "logs: $LOGS"
echo "${tests_passed} passed, ${tests_failed} failed, ${tests_skipped} skipped"
[ "$status_configure" = ok ] && [ "$status_build" = ok ] && [ "$status_tests" = ok ] && [ "$status_bench" = ok ]
