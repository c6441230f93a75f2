#!/usr/bin/env bash
# Installs Lathe's build and test dependencies from Debian's packages (Debian 12).
# Idempotent: packages already present are skipped by apt; safe to run on every CI start.
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build pkg-config git
  libdnnl-dev libsqlite3-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev zlib1g-dev
  libonnx-dev libprotobuf-dev
  libzip-dev libpng-dev libjpeg62-turbo-dev
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libgloo-dev libhiredis-dev redis-server
  poppler-utils
  slurmctld slurmd slurm-client munge
  xvfb xauth
  dataset-fashion-mnist
  python3 python3-venv python3-numpy
  clang libomp-dev
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
