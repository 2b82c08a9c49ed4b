"""pynenc's exported integration suite for state backend, run against every backend."""

from pynenc_tests.integration.state_backend.all_tests import *  # noqa: F403
