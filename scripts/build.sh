#!/usr/bin/env bash
# Configures and builds Lathe in Release. LATHE_CUDA=AUTO builds the CUDA backend when nvcc is found.
# Usage: scripts/build.sh [build-dir]   (default: build); extra CMake flags via LATHE_CMAKE_FLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLATHE_CUDA="${LATHE_CUDA:-AUTO}" ${LATHE_CMAKE_FLAGS:-}
cmake --build "$build" -j "$(nproc)"
