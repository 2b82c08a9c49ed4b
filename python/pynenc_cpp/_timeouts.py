"""Task timeouts stored across a storage outage, for ``CppRunner``.

The watchdog (the engine's timer thread) sets a timed-out invocation FAILED at
once when the storage answers. When it does not, the error is kept and stored on
a later heartbeat tick or at stop, so the invocation does not stay RUNNING under
a live runner; one whose lost attempt may have landed is looked up first, and
only the trigger reports that attempt never made are made.
"""

from __future__ import annotations

import logging
import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pynenc.exceptions import InvocationStatusError
from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation.status import InvocationStatus

from pynenc_cpp._outage import no_ride_out
from pynenc_cpp.errors import BackendConnectionError

if TYPE_CHECKING:
    from pynenc.runner.runner_context import RunnerContext

    from pynenc_cpp.runner import TaskTimeoutError


class TimeoutRecords:
    """``CppRunner``'s record of timeouts not stored yet (a mixin).

    Thread-safe: the watchdog adds, the heartbeat tick and the stop retry, under
    ``_unrecorded_lock``.
    """

    app: Any
    logger: logging.Logger
    runner_context: RunnerContext
    # (error, whether a lost attempt may have stored it already), by invocation id.
    _unrecorded_timeouts: dict[InvocationId, tuple[TaskTimeoutError, bool]]

    @cached_property
    def _unrecorded_lock(self) -> threading.Lock:
        return threading.Lock()

    def _record_timeout(self, inv_id: InvocationId, error: TaskTimeoutError) -> bool:
        """FAILED with ``error`` for a timed-out invocation; on an unreachable storage it
        is kept and tried again on each heartbeat tick (``_record_timeouts``). Returns
        whether it is settled (stored, or finished otherwise)."""
        try:
            # The timer thread (heartbeats, the watchdog) does not wait for the storage.
            with no_ride_out():
                invocation = self.app.state_backend.get_invocation(inv_id)
                self.app.orchestrator.set_invocation_exception(
                    invocation, error, self.runner_context
                )
        except InvocationStatusError as ex:
            self.logger.info(f"invocation:{inv_id} finished as it timed out: {ex}")
        except BackendConnectionError as ex:
            sent = bool(getattr(ex, "maybe_applied", True))
            with self._unrecorded_lock:
                first = inv_id not in self._unrecorded_timeouts
                _, was_sent = self._unrecorded_timeouts.get(inv_id, (error, False))
                self._unrecorded_timeouts[inv_id] = (error, sent or was_sent)
            if first:
                self.logger.warning(
                    f"invocation:{inv_id} timed out; storage unreachable, FAILED is stored "
                    f"when it answers: {ex}"
                )
            return False
        except Exception:
            self.logger.exception(f"invocation:{inv_id} timed out; could not record it")
        with self._unrecorded_lock:
            self._unrecorded_timeouts.pop(inv_id, None)
        return True

    def _record_timeouts(self) -> None:
        """Tries again the timeouts not stored for an outage (heartbeat tick, stop).

        One whose earlier attempt may have landed is first looked up: found FAILED,
        it was stored, and only the trigger reports that the lost attempt never got
        to make are made."""
        with self._unrecorded_lock:
            pending = list(self._unrecorded_timeouts.items())
        for inv_id, (error, maybe_stored) in pending:
            if maybe_stored:
                try:
                    with no_ride_out():
                        status = self.app.orchestrator.get_invocation_status(inv_id)
                except BackendConnectionError:
                    return  # still unreachable: the next tick tries again
                except Exception:
                    self.logger.exception(f"invocation:{inv_id} status unreadable")
                    status = None
                if status == InvocationStatus.FAILED:
                    self._report_landed_timeout(inv_id, error)
                    continue
            if not self._record_timeout(inv_id, error):
                return  # still unreachable: the next tick tries again

    def _report_landed_timeout(self, inv_id: InvocationId, error: TaskTimeoutError) -> None:
        with self._unrecorded_lock:
            self._unrecorded_timeouts.pop(inv_id, None)
        self.logger.warning(
            f"invocation:{inv_id} timeout was stored before the connection was lost"
        )
        try:
            with no_ride_out():
                trigger = self.app.trigger
                trigger.report_tasks_status([inv_id], InvocationStatus.FAILED)
                invocation = self.app.state_backend.get_invocation(inv_id)
                trigger.report_invocation_failure(invocation, error)
        except Exception:
            self.logger.exception(f"invocation:{inv_id} timeout: trigger reports not made")
