"""pynenc's exported unit suite for trigger, run against cpp_mem."""

from pynenc_tests.unit.trigger.all_tests import *  # noqa: F403
