#!/usr/bin/env bash
# Regenerates the stubs of the extension, python/pynenc_cpp/_core/ (one .pyi per
# subsystem submodule, bindings/module.cc; __init__.pyi holds the errors, the core
# types and the re-exports), from the built extension, or writes them to the
# directory given as the first argument (tests_py/test_typing.py compares that
# with the committed stubs). pybind11-stubgen cannot see attributes set on
# exception instances, so those fields are added afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
dst=${1:-python/pynenc_cpp/_core}
# Both tools are test extras (scripts/setup.sh installs them).
[ -x .venv/bin/pybind11-stubgen ] || .venv/bin/python -m pip install -q "pybind11-stubgen>=2.5"
[ -x .venv/bin/ruff ] || .venv/bin/python -m pip install -q "ruff>=0.6"
out=$(mktemp -d)
.venv/bin/pybind11-stubgen pynenc_cpp._core -o "$out"
.venv/bin/python - "$out/pynenc_cpp/_core/__init__.pyi" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
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
# The struct sequences (bindings/structs.h): stubgen sees bare tuple subclasses; each
# becomes a typed tuple with one property per field (names and docs from the type).
import re

from pynenc_cpp import _core
struct_types = {
    "StatusRecord": ["str", "str | None", "int"],
    "Claim": ["str", "StatusRecord", "dict[str, typing.Any] | None", "bool"],
    "Change": ["StatusRecord", "bool"],
    "Finish": ["StatusRecord", "bool", "bool"],
}
for cls, types in struct_types.items():
    kind = getattr(_core, cls)
    names = kind.__match_args__
    assert len(names) == len(types), (cls, names)
    i = text.index(f"class {cls}(tuple):\n")
    # The class ends at the next top-level line (or the end of the file).
    m = re.compile(r"^\S", re.M).search(text, text.index("\n", i) + 1)
    j = m.start() if m else len(text)
    lines = [f"class {cls}(tuple[{', '.join(types)}]):", '    """', f"    {kind.__doc__}", '    """', ""]
    for name, typ in zip(names, types):
        doc = getattr(kind, name).__doc__
        lines += ["    @property", f"    def {name}(self) -> {typ}:", f'        """{doc}"""']
    text = text[:i] + "\n".join(lines) + "\n\n" + text[j:]
open(path, "w").write(text)
PY
# The repository's formatting.
.venv/bin/ruff check -q --fix --select I "$out/pynenc_cpp/_core"
.venv/bin/ruff format -q "$out/pynenc_cpp/_core"
if [ -e "$dst" ] && [ -n "$(find "$dst" ! -type d ! -name '*.pyi' -print -quit)" ]; then
  echo "refusing to replace $dst: it holds files other than stubs" >&2
  exit 1
fi
rm -rf "$dst"
mkdir -p "$(dirname "$dst")"
mv "$out/pynenc_cpp/_core" "$dst"
rm -rf "$out"
echo "wrote $dst"
