#!/usr/bin/env bash
# The main job: installs the dependencies, builds, and runs the default experiment (the reference
# CNN on Fashion-MNIST) headless with lathe-cli. Extra arguments go to lathe-cli run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh build
exec ./build/app/lathe-cli run experiments/default.json "$@"
