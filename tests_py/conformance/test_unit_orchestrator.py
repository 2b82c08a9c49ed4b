"""pynenc's exported unit suite for orchestrator, run against cpp_mem."""

from pynenc_tests.unit.orchestrator.all_tests import *  # noqa: F403
