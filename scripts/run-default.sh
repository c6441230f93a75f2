#!/usr/bin/env bash
# The main job: installs the dependencies, builds, and opens the desktop app on the default
# experiment (the reference CNN on Fashion-MNIST) when a display exists; on a headless machine it
# runs the same experiment with lathe-cli. Extra arguments go to lathe-cli run (headless only).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh build
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x build/app/gui/lathe ]; then
  exec ./build/app/gui/lathe experiments/default.json
fi
exec ./build/app/lathe-cli run experiments/default.json "$@"
