"""pynenc's exported unit suite for client data store, run against cpp_mem."""

from pynenc_tests.unit.client_data_store.all_tests import *  # noqa: F403
