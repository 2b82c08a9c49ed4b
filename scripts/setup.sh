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

# Find a Python: 3.12 preferred (the version CI targets), else any newer one.
# PATH first, then pyenv's versions.
python_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; }
python_is() { "$1" -c "import sys; sys.exit(0 if sys.version_info[:2] == ($2) else 1)" 2>/dev/null; }
candidates() {
  local root="${PYENV_ROOT:-$HOME/.pyenv}" c
  [ -n "${PYNENC_CPP_PYTHON:-}" ] && echo "$PYNENC_CPP_PYTHON"
  for c in python3.12 python3.13 python3.14 python3; do command -v "$c" 2>/dev/null || true; done
  ls -d "$root"/versions/3.* 2>/dev/null | sort -rV | sed 's|$|/bin/python3|'
}
find_python() {
  local c
  for c in $(candidates); do [ -x "$c" ] && python_is "$c" "3, 12" && { echo "$c"; return; }; done
  for c in $(candidates); do [ -x "$c" ] && python_ok "$c" && { echo "$c"; return; }; done
  return 1
}

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
