"""pynenc's exported integration suite for app id isolation, run against every backend."""

from pynenc_tests.integration.app_id_isolation.all_tests import *  # noqa: F403
