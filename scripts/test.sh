#!/usr/bin/env bash
# Installs the dependencies, builds everything and runs every test (unit, e2e; gpu tests skip with a
# reason when there is no device). Usage: scripts/test.sh [build-dir]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bash scripts/install-deps.sh
bash scripts/build.sh "$build"
bash scripts/gpu-check.sh --dry-run "$build"  # the GPU check minus the device, so it cannot rot
cd "$build"
ctest --output-on-failure -j2 --timeout 900
