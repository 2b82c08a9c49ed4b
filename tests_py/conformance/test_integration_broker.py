"""pynenc's exported integration suite for broker, run against every backend."""

from pynenc_tests.integration.broker.all_tests import *  # noqa: F403
