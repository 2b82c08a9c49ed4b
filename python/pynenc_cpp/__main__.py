"""``python -m pynenc_cpp``: the ``pynenc-cpp`` command (see ``pynenc_cpp.cli``)."""

from pynenc_cpp.cli import run

run()
