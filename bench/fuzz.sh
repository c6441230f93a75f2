#!/usr/bin/env bash
# Runs the libFuzzer targets (fuzz/), each for SECONDS, one after another, and prints per target the
# executions per second, the corpus it grew (files and bytes) and the crashes, leaks, timeouts or
# out-of-memory inputs it found (saved under BUILD/fuzz-artifacts/<target>/).
# Builds its folder first: the configuration of scripts/test-sanitize.sh plus libFuzzer's coverage
# instrumentation (LATHE_FUZZ_COVERAGE, which that script leaves out), without which fuzzing is blind.
# Each target starts from fuzz/corpus/<target>/ and grows BUILD/fuzz-work/<target>/ (the committed
# corpus is never written; FUZZ_MERGE=1 merges minimized new inputs into it at the end).
# Usage: bench/fuzz.sh SECONDS [target...]     (default: every target; BUILD: $FUZZ_BUILD or build-fuzz)
set -uo pipefail
cd "$(dirname "$0")/.."
all=(config set idx safetensors teacher_cache sparse_model int8_model store npy npz)
seconds=${1:?usage: bench/fuzz.sh SECONDS [target...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
build=${FUZZ_BUILD:-build-fuzz}

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -DNDEBUG" \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DLATHE_SANITIZE=address,undefined -DLATHE_FUZZ=ON -DLATHE_FUZZ_COVERAGE=ON \
    -DLATHE_CUDA=OFF -DLATHE_GUI=OFF -DLATHE_BUILD_BENCH=OFF >/dev/null || exit 1
elif ! grep -q '^LATHE_FUZZ_COVERAGE:BOOL=ON' "$build/CMakeCache.txt"; then
  echo "fuzz.sh: $build is built without libFuzzer's coverage instrumentation (LATHE_FUZZ_COVERAGE=OFF," \
       "as scripts/test-sanitize.sh builds): fuzzing it would be blind; use another FUZZ_BUILD" >&2
  exit 1
fi
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then  # FUZZ_NO_BUILD=1: run the binaries as they are
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null || exit 1
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1

status=0
printf '%-14s %8s %10s %8s %10s %s\n' target seconds exec/s files bytes result
for t in "${targets[@]}"; do
  work="$build/fuzz-work/$t" art="$build/fuzz-artifacts/$t" log="$build/fuzz-work/$t.log"
  mkdir -p "$work" "$art"
  "$build/fuzz/fuzz_$t" "$work" "fuzz/corpus/$t" -max_total_time="$seconds" -print_final_stats=1 \
    -timeout=25 -rss_limit_mb=2048 -malloc_limit_mb=1024 -artifact_prefix="$art/" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  files=$(find "$work" -type f | wc -l)
  bytes=$(find "$work" -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
  found=$(find "$art" -type f | wc -l)
  if [ "$rc" -eq 0 ] && [ "$found" -eq 0 ]; then
    result=ok
  else
    result="FAILED (rc $rc, $found artifact(s) in $art; log $log)"
    status=1
  fi
  printf '%-14s %8s %10s %8s %10s %s\n' "$t" "$seconds" "${execs:-?}" "$files" "$bytes" "$result"
  if [ "${FUZZ_MERGE:-0}" = 1 ] && [ "$rc" -eq 0 ]; then
    "$build/fuzz/fuzz_$t" -merge=1 "fuzz/corpus/$t" "$work" >"$log.merge" 2>&1 || status=1
  fi
done
exit $status
