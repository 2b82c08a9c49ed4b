"""pynenc's exported integration suite for client data store, run against every backend."""

from pynenc_tests.integration.test_client_data_store.all_tests import *  # noqa: F403
