# Sourced by scripts/setup.sh and scripts/build_wheels.sh: finds CPython interpreters
# on PATH, then under pyenv's versions folder ($PYENV_ROOT, default ~/.pyenv);
# PYNENC_CPP_PYTHON names one first.

python_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; }
python_is() { "$1" -c "import sys; sys.exit(0 if sys.version_info[:2] == ($2) else 1)" 2>/dev/null; }
python_candidates() {
  local root="${PYENV_ROOT:-$HOME/.pyenv}" c
  [ -n "${PYNENC_CPP_PYTHON:-}" ] && echo "$PYNENC_CPP_PYTHON"
  for c in python3.12 python3.13 python3.14 python3; do command -v "$c" 2>/dev/null || true; done
  ls -d "$root"/versions/3.* 2>/dev/null | sort -rV | sed 's|$|/bin/python3|'
}
# find_python_version 3.13: prints an interpreter of that minor version, or fails.
find_python_version() {
  local want="${1/./, }" c
  for c in $(python_candidates); do [ -x "$c" ] && python_is "$c" "$want" && { echo "$c"; return; }; done
  return 1
}
# find_python: 3.12 preferred (the version CI targets), else any newer one.
find_python() {
  local c
  find_python_version 3.12 && return
  for c in $(python_candidates); do [ -x "$c" ] && python_ok "$c" && { echo "$c"; return; }; done
  return 1
}
