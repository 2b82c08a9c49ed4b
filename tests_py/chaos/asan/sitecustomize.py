"""Loads the engine built under AddressSanitizer + UBSan in place of the installed one.

``scripts/chaos.sh`` puts this directory on ``PYTHONPATH`` (so every process of a
chaos run, runners included, imports it at start-up), preloads the ASan runtime and
sets ``PYNENC_CPP_CORE`` to the sanitized ``_core`` extension. ``from pynenc_cpp
import _core`` then finds that module in ``sys.modules``. Without the variable this
does nothing.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys

_path = os.environ.get("PYNENC_CPP_CORE")
if _path:
    _loader = importlib.machinery.ExtensionFileLoader("pynenc_cpp._core", _path)
    _spec = importlib.util.spec_from_file_location("pynenc_cpp._core", _path, loader=_loader)
    assert _spec is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["pynenc_cpp._core"] = _module
    _loader.exec_module(_module)
