#!/usr/bin/env bash
# Downloads (does not install) the Debian packages that scripts/gpu-check.sh needs to build the
# engine on a lent GPU machine that reaches no package registry. They land in .gpu-deps/, which is
# kept out of git (.git/info/exclude); name `.gpu-deps` in the device tool's `carry`, and
# gpu-check.sh unpacks them to /tmp/lathe-deps there. Run here, in the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(libdnnl-dev libdnnl2 libsqlite3-dev libsqlite3-0 nlohmann-json3-dev libcli11-dev libgtest-dev googletest libgmock-dev
      zlib1g-dev)
mkdir -p .gpu-deps
grep -qx '/.gpu-deps/' .git/info/exclude 2>/dev/null || echo '/.gpu-deps/' >> .git/info/exclude
(cd .gpu-deps && apt-get download "${pkgs[@]}")
du -sh .gpu-deps
