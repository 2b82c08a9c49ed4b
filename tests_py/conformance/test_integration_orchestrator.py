"""pynenc's exported integration suite for orchestrator, run against every backend."""

from pynenc_tests.integration.orchestrator.all_tests import *  # noqa: F403
from pynenc_tests.integration.orchestrator.conftest import *  # noqa: F403
