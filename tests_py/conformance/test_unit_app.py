"""pynenc's exported unit suite for app, run against cpp_mem."""

from pynenc_tests.unit.app.all_tests import *  # noqa: F403
