#!/usr/bin/env bash
# Regenerates python/pynenc_cpp/_core.pyi from the built extension.
# pybind11-stubgen cannot see attributes set on exception instances, so the
# transition-error fields are added afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pip install -q pybind11-stubgen
out=$(mktemp -d)
.venv/bin/pybind11-stubgen pynenc_cpp._core -o "$out"
.venv/bin/python - "$out/pynenc_cpp/_core.pyi" python/pynenc_cpp/_core.pyi <<'PY'
import sys
src, dst = sys.argv[1], sys.argv[2]
text = open(src).read()
fields = {
    "IllegalTransition": ["from_status: str | None", "to_status: str", "allowed: list[str]",
                          "reason: str"],
    "OwnershipViolation": ["from_status: str", "to_status: str", "current_owner: str | None",
                           "attempted_owner: str | None", "reason: str"],
}
for cls, attrs in fields.items():
    head = f"class {cls}(EngineError):\n"
    i = text.index(head) + len(head)
    j = text.index('    """\n', text.index('    """\n', i) + 1) + len('    """\n')
    text = text[:j] + "".join(f"    {a}\n" for a in attrs) + text[j:]
open(dst, "w").write(text)
PY
rm -rf "$out"
# The repository's formatting (ruff is a dev extra).
.venv/bin/python -m pip install -q "ruff>=0.6"
.venv/bin/ruff check -q --fix --select I python/pynenc_cpp/_core.pyi
.venv/bin/ruff format -q python/pynenc_cpp/_core.pyi
echo "wrote python/pynenc_cpp/_core.pyi"
