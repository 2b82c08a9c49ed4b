"""pynenc's exported unit suite for broker, run against cpp_mem."""

from pynenc_tests.unit.broker.all_tests import *  # noqa: F403
