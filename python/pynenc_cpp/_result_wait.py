"""Blocking result waits for ``CppRunner``: a client reading ``invocation.result``
or a task waiting on its children blocks in the engine orchestrator until one of
the invocations is final, with the GIL released, instead of sleeping pynenc's
``invocation_wait_results_sleep_time_sec``."""

from __future__ import annotations

import logging
import threading
import time
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pynenc_cpp._component import CppComponentMixin
from pynenc_cpp.errors import BackendConnectionError

if TYPE_CHECKING:
    from pynenc.identifiers.invocation_id import InvocationId

#: Longest single blocking wait for a result (it returns as soon as one is final);
#: bounded so that Ctrl-C and stop requests are served within it.
_WAIT_BLOCK_SEC = 1.0
#: Pause before re-waiting on ids already seen final (stale status cache).
_STALE_CACHE_SLEEP_SEC = 0.005


class ResultWaits:
    """``CppRunner``'s blocking wait on the engine orchestrator (a mixin).

    Thread-safe: each thread keeps its own memory of the last wait (``_wait_memo``).
    """

    app: Any
    logger: logging.Logger
    runner_id: str

    @cached_property
    def _wait_memo(self) -> threading.local:
        """Per-thread memory of the ids the last wait found final."""
        return threading.local()

    def _wait_any_final(self, invocation_ids: list[InvocationId]) -> bool:
        """Blocks in the engine orchestrator until one of ``invocation_ids`` is final,
        at most ``_WAIT_BLOCK_SEC`` (keeps Ctrl-C and stop requests responsive).

        Returns False when there is no engine orchestrator to wait on (or it
        failed: logged), so the caller falls back to sleeping.

        pynenc's invocation status cache (``cached_status_time``) may keep showing
        a non-final status for a while after the invocation finished; the caller
        then asks again at once. A repeated request for ids this thread already saw
        final sleeps briefly instead of spinning (set ``cached_status_time`` to 0
        for the lowest result latency).
        """
        orchestrator = self.app.orchestrator
        if not isinstance(orchestrator, CppComponentMixin) or not invocation_ids:
            return False
        engine = orchestrator.storage.orchestrator()
        ids = [str(i) for i in invocation_ids]
        seen = getattr(self._wait_memo, "final_ids", None)
        if seen is not None and seen == ids:
            # The caller still sees a non-final (cached) status for ids already final.
            time.sleep(min(float(self.app.conf.cached_status_time), _STALE_CACHE_SLEEP_SEC))
        # Native mode: the orchestrator's own wait also reads the final record (served
        # to this thread's next status read of the id, so it costs no round trip).
        wait = getattr(self.app.orchestrator, "wait_any_final", engine.wait_any_final)
        try:
            final_id = wait(ids, _WAIT_BLOCK_SEC)
        except BackendConnectionError as exc:  # an outage: the status reads ride it out
            self.logger.warning(f"CppRunner:{self.runner_id} wait_any_final: {exc}")
            return False
        except Exception:
            self.logger.exception(f"CppRunner:{self.runner_id} wait_any_final failed")
            return False
        self._wait_memo.final_ids = ids if final_id is not None else None
        if final_id is not None:
            # The caller's invocation object sees the final status now, whatever its
            # status cache held (pynenc's `cached_status_time`).
            note_final = getattr(orchestrator, "_note_final", None)
            if note_final is not None:
                try:
                    note_final(final_id)
                except Exception as exc:  # the caller's own status reads meet it again
                    self.logger.warning(f"CppRunner:{self.runner_id} reading {final_id}: {exc}")
        return True
