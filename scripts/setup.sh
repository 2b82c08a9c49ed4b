#!/usr/bin/env bash
# Prepares this checkout on a fresh Debian machine: apt packages, a Python >= 3.12
# virtualenv in .venv, and an editable install of pynenc-cpp with its test extras.
# Idempotent; a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake ninja-build pkg-config
  libboost-dev libhiredis-dev libsqlite3-dev nlohmann-json3-dev libssl-dev
  libgtest-dev libgmock-dev redis-server
  clang libclang-rt-14-dev)  # clang + its fuzzer runtime: scripts/fuzz.sh (libFuzzer targets)

log() { printf '[setup] %s\n' "$*"; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing apt packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# shellcheck source=scripts/find_python.sh
source scripts/find_python.sh

VENV=.venv
PY=$(find_python) || { echo "[setup] no Python >= 3.12 found (set PYNENC_CPP_PYTHON)" >&2; exit 1; }
want_ver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
have_ver=$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
if [ "$have_ver" != "$want_ver" ]; then
  log "creating $VENV with $PY"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
export PIP_NO_WARN_SCRIPT_LOCATION=1

# Dependencies: reinstalled only when pyproject.toml changes.
stamp="$VENV/.pynenc-cpp-deps"
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing build and test dependencies"
  "${PIP[@]}" install --upgrade pip >/dev/null
  "${PIP[@]}" install "scikit-build-core>=0.10" "pybind11>=2.13" ninja
  "${PIP[@]}" install --no-build-isolation -e ".[test]"
  echo "$want" >"$stamp"
else
  # Incremental rebuild of the extension (fast when nothing changed).
  "${PIP[@]}" install --no-build-isolation --no-deps -e .
fi
log "ready: $("$VENV/bin/python" -c 'import importlib.metadata as m, pynenc_cpp; print("pynenc-cpp", pynenc_cpp.__version__, "on pynenc", m.version("pynenc"), "in", __import__("sys").version.split()[0])')"
