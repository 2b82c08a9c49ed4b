#!/usr/bin/env bash
# Regenerates python/pynenc_cpp/_core.pyi from the built extension (or writes it
# to the path given as the first argument: tests_py/test_typing.py compares that
# with the committed stub). pybind11-stubgen cannot see attributes set on
# exception instances, so those fields are added afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
dst=${1:-python/pynenc_cpp/_core.pyi}
# Both tools are test extras (scripts/setup.sh installs them).
[ -x .venv/bin/pybind11-stubgen ] || .venv/bin/python -m pip install -q "pybind11-stubgen>=2.5"
[ -x .venv/bin/ruff ] || .venv/bin/python -m pip install -q "ruff>=0.6"
out=$(mktemp -d)
.venv/bin/pybind11-stubgen pynenc_cpp._core -o "$out"
.venv/bin/python - "$out/pynenc_cpp/_core.pyi" "$dst" <<'PY'
import sys
src, dst = sys.argv[1], sys.argv[2]
text = open(src).read()
fields = {
    "IllegalTransition": ["from_status: str | None", "to_status: str", "allowed: list[str]",
                          "reason: str"],
    "OwnershipViolation": ["from_status: str", "to_status: str", "current_owner: str | None",
                           "attempted_owner: str | None", "reason: str"],
    "BackendConnectionError": ["maybe_applied: bool"],
}
for cls, attrs in fields.items():
    i = text.index(f"class {cls}(")
    i = text.index("\n", i) + 1
    j = text.index('    """\n', text.index('    """\n', i) + 1) + len('    """\n')
    text = text[:j] + "".join(f"    {a}\n" for a in attrs) + text[j:]
open(dst, "w").write(text)
PY
rm -rf "$out"
# The repository's formatting.
.venv/bin/ruff check -q --fix --select I "$dst"
.venv/bin/ruff format -q "$dst"
echo "wrote $dst"
