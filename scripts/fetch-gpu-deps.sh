#!/usr/bin/env bash
# Downloads (does not install) the Debian packages that scripts/gpu-check.sh needs to build the
# engine on a lent GPU machine that reaches no package registry. They land in .gpu-deps/, which is
# kept out of git (.git/info/exclude); name `.gpu-deps` in the device tool's `carry`, and
# gpu-check.sh unpacks them to /tmp/lathe-deps there (`--unpack`). Run here, in the repository root.
#
#   scripts/fetch-gpu-deps.sh              download into .gpu-deps/, unpack to a temporary folder and check it
#   scripts/fetch-gpu-deps.sh --unpack D   unpack .gpu-deps/*.deb into D and make the tree self-consistent
#   scripts/fetch-gpu-deps.sh --check D    check an unpacked tree (exit 1 on a problem)
#
# The unpacked tree must stand on its own on a newer image: absolute symbolic links inside it (zlib1g-
# dev's libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13) are rewritten as relative links into the
# tree, and every shared library in it must find what it needs (objdump's NEEDED) in the tree or in
# what any image with a C++ compiler has (glibc, libstdc++, libgcc_s; libgomp, which some images lack,
# comes as a fallback unpacked to D-fallback and used only where the machine has none).
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(libdnnl-dev libdnnl2 ocl-icd-libopencl1 libsqlite3-dev libsqlite3-0 nlohmann-json3-dev libcli11-dev libgtest-dev
      googletest libgmock-dev zlib1g-dev zlib1g)
fallback_pkgs=(libgomp1)
# Sonames every image with g++ provides (libgomp is checked against the fallback instead).
base_sonames='^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux-x86-64)\.so'
multiarch=x86_64-linux-gnu

unpack() {  # unpack DEST
  local dest=$1
  mkdir -p "$dest" "$dest-fallback"
  for f in .gpu-deps/*.deb; do dpkg -x "$f" "$dest"; done
  for f in .gpu-deps/fallback/*.deb; do [ -e "$f" ] && dpkg -x "$f" "$dest-fallback"; done
  local root
  for root in "$dest" "$dest-fallback"; do
    # Absolute links point at the machine's /, not at the tree: make them relative when the tree has the target.
    find "$root" -type l | while read -r link; do
      local target
      target=$(readlink "$link")
      case $target in
        /*)
          if [ -e "$root$target" ]; then
            ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$root$target")" "$link"
          fi
          ;;
      esac
    done
  done
}

check() {  # check DEST: exit 1 on a dangling link that CMake needs, or a library whose needs are not met
  local dest=$1 bad=0 lib need
  local libdir=$dest/usr/lib/$multiarch
  for lib in libdnnl.so libsqlite3.so libz.so libgtest.a libgmock.a; do
    if [ ! -e "$libdir/$lib" ]; then
      echo "missing or dangling: $libdir/$lib -> $(readlink "$libdir/$lib" 2>/dev/null || echo '(none)')"
      bad=1
    fi
  done
  while read -r link; do
    [ -e "$link" ] || case $(readlink "$link") in /*) echo "absolute dangling link: $link -> $(readlink "$link")"; bad=1 ;; esac
  done < <(find "$dest" -type l -name '*.so*')
  local provided
  provided=$(find "$dest" "$dest-fallback" -name '*.so*' -printf '%f\n' | sort -u)
  while read -r lib; do
    while read -r need; do
      [[ $need =~ $base_sonames ]] && continue
      grep -qxF "$need" <<<"$provided" && continue
      echo "$(basename "$lib") needs $need: neither in the tree nor on every image"
      bad=1
    done < <(objdump -p "$lib" 2>/dev/null | awk '/NEEDED/ { print $2 }')
  done < <(find "$dest" -type f -name '*.so.*')
  return $bad
}

case ${1:-} in
  --unpack)
    unpack "${2:?usage: $0 --unpack DEST}"
    exit 0
    ;;
  --check)
    check "${2:?usage: $0 --check DEST}"
    exit $?
    ;;
esac

mkdir -p .gpu-deps/fallback
exclude="$(git rev-parse --git-common-dir)/info/exclude"  # shared by the worktrees of the repository
grep -qx '/.gpu-deps/' "$exclude" 2>/dev/null || echo '/.gpu-deps/' >>"$exclude"
(cd .gpu-deps && apt-get download "${pkgs[@]}")
(cd .gpu-deps/fallback && apt-get download "${fallback_pkgs[@]}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unpack "$tmp/deps"
if check "$tmp/deps"; then
  echo "fetch-gpu-deps: the unpacked tree is self-consistent"
else
  echo "fetch-gpu-deps: the unpacked tree has problems (above)" >&2
  exit 1
fi
du -sh .gpu-deps
