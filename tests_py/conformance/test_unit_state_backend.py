"""pynenc's exported unit suite for state backend, run against cpp_mem."""

from pynenc_tests.unit.state_backend.all_tests import *  # noqa: F403
