"""pynenc's exported unit suite for app id isolation, run against cpp_mem."""

from pynenc_tests.unit.app_id_isolation.all_tests import *  # noqa: F403
