"""pynenc's exported unit suite for trigger, run against cpp_mem."""

import pytest
from pynenc import Pynenc
from pynenc.trigger.base_trigger import BaseTrigger
from pynenc_tests.unit.trigger import test_trigger_all_instances as _all_instances
from pynenc_tests.unit.trigger.all_tests import *  # noqa: F403


@pytest.fixture
def trigger(app_instance: Pynenc) -> BaseTrigger:
    """Adaptation of a pynenc 0.4.0 suite defect (docs/conformance.md): all_tests.py
    star-imports three modules that each define a `trigger` fixture; the last one wins
    and does not rebind `test_trigger_all_instances.add` to the app under test, so
    `test_report_task_status` looked its invocation up in the wrong app. This fixture
    does what every one of the three does, plus that rebinding."""
    _all_instances.add.app = app_instance
    return app_instance.trigger
