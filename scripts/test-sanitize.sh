#!/usr/bin/env bash
# The sanitizer part of CI: builds the engine, the unit test suites and the fuzz targets with clang,
# AddressSanitizer (+ LeakSanitizer) and UBSan (LATHE_SANITIZE=address,undefined, LATHE_FUZZ=ON; no
# CUDA, no Qt, no benchmarks), replays every fuzz corpus (fuzz/corpus/<target>/) as regression
# inputs, then runs the unit tests (ctest -L unit; LATHE_ASAN_SKIP: a regex of tests to leave out).
# Any sanitizer report, leak or uncaught exception fails the script. Every target is a unity build
# (CMAKE_UNITY_BUILD: the engine's libraries too, in batches of 8 files): this folder is built once
# and checked, not edited and rebuilt, so the fewer, larger compilations only save time: cold, the
# build took 496 CPU-s against 818 file by file (about 4 min on 2 idle cores instead of 7).
# No libFuzzer coverage instrumentation (LATHE_FUZZ_COVERAGE=OFF): replaying a corpus runs every input
# without it, and with it (its comparison hooks in every function) the build took 436 s instead of
# 329 and the unit tests 298 s instead of 181 (2 cores, ccache off). bench/fuzz.sh builds with it.
# Usage: scripts/test-sanitize.sh [build-dir]   (default: build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
bash scripts/install-deps.sh

t0=$(date +%s)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DLATHE_SANITIZE=address,undefined -DLATHE_FUZZ=ON \
  -DLATHE_CUDA=OFF -DLATHE_GUI=OFF -DLATHE_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD=ON \
  -DLATHE_FUZZ_COVERAGE=OFF >/dev/null
# The unit-labelled suites, as tests/CMakeLists.txt declares them (core backend nn data run ...).
mapfile -t suites < <(sed -n 's/^lathe_test_suite(\([a-z0-9_]*\) unit.*/\1/p' tests/CMakeLists.txt)
targets=(config set idx safetensors teacher_cache sparse_model int8_model store npy npz)
cmake --build "$build" -j "$(nproc)" --target "${suites[@]/#/test_}" "${targets[@]/#/fuzz_}"
t1=$(date +%s)
echo "test-sanitize: build $((t1 - t0)) s"

# detect_leaks: LeakSanitizer at exit. The OpenMP runtime's worker threads are not a leak source,
# but one thread keeps the reports deterministic and the 2-core CI machine unshared.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OMP_NUM_THREADS=1

for t in "${targets[@]}"; do
  n=$(find "fuzz/corpus/$t" -type f | wc -l)
  echo "test-sanitize: fuzz_$t over $n corpus files"
  "$build/fuzz/fuzz_$t" -runs=0 "fuzz/corpus/$t" 2>&1 | tail -n 3
done
t2=$(date +%s)
echo "test-sanitize: corpora $((t2 - t1)) s"

# A ctest regex of tests to leave out (none by default: every unit test runs under ASan in ~3 min
# on 2 cores; the slowest, Int8Linear.MatchesReferenceAndF32OnOddShapes, takes ~18 s).
skip=${LATHE_ASAN_SKIP:-}
ctest --test-dir "$build" -L unit -j "$(nproc)" --timeout 900 --output-on-failure ${skip:+-E "$skip"}
t3=$(date +%s)
echo "test-sanitize: unit tests $((t3 - t2)) s; total $((t3 - t0)) s"
