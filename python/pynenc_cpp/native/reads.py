"""Native mode's status reads: ``wait_any_final`` (blocks without the GIL) and
``get_invocation_status_record`` served from what a wait or a read ahead fetched,
with a SUCCESS status's result read in the same call."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pynenc.identifiers.invocation_id import InvocationId
from pynenc.invocation.status import InvocationStatusRecord

from pynenc_cpp import _core
from pynenc_cpp._native_step import native_step
from pynenc_cpp.errors import names_invocation
from pynenc_cpp.native.base import NativeBase
from pynenc_cpp.orchestrator import _record
from pynenc_cpp.state_backend import _PREFETCH_TTL_SEC

#: The largest result read together with its SUCCESS status (a larger one is read
#: on its own when asked for).
_PREFETCH_RESULT_BYTES = 64 * 1024


class ReadsStatus(NativeBase):
    """Status reads (a mixin of ``CppNativeOrchestrator``)."""

    # ---- status reads ------------------------------------------------------

    @native_step
    def wait_any_final(
        self, lifecycle: _core.Lifecycle, invocation_ids: Sequence[str], timeout_sec: float
    ) -> str | None:
        """Blocks (GIL released) until one of ``invocation_ids`` is final, at most
        ``timeout_sec``; returns that id, or None when the time ran out.

        The engine reads the final status record (and a SUCCESS result up to
        ``_PREFETCH_RESULT_BYTES``) in the same call (on Redis in the wait's own round
        trips: the note that wakes the waiter carries them), and this thread's next
        status read of that id is served from it: the read pynenc's
        ``invocation.result`` makes after a wait costs nothing. A final status never
        changes; any other status read on this thread drops what was kept, and so do
        a purge and ``_PREFETCH_TTL_SEC``.
        """
        self._final_seen.note = None  # what an earlier wait read is not served after this one
        generation = self.app.state_backend.prefetch_generation()  # before the read
        got = lifecycle.wait_any_final(list(invocation_ids), timeout_sec, _PREFETCH_RESULT_BYTES)
        if got is None:
            return None
        final_id: str
        final_id, raw, result = got
        if raw is not None:
            self._final_seen.note = (final_id, raw, result, generation, time.monotonic())
        return final_id

    @names_invocation
    @native_step
    def get_invocation_status_record(
        self, lifecycle: _core.Lifecycle, invocation_id: InvocationId
    ) -> InvocationStatusRecord:
        """The status record, read in one engine call with the result when the status
        is SUCCESS (results up to ``_PREFETCH_RESULT_BYTES``; one Redis script).

        The result is handed to the state backend for this thread's next
        ``get_result`` of the id: pynenc's ``invocation.result`` reads the status, then
        the result, so it makes one round trip instead of two. Right after this
        thread's ``wait_any_final`` found the id final, nothing is read: the wait read
        both already. On Redis the read also reads ahead, when the status is final,
        other invocations this thread submitted and has not read yet, and serves
        those found final to the thread's next reads of them
        (``pynenc_cpp._read_ahead``); and the first read of an invocation this thread
        submitted, finding it not final, registers this thread's wait for it in the
        same script (``Lifecycle.read_final(arm=True)``): pynenc's ``result`` waits
        next, and that wait then makes no registration round trip of its own.
        """
        state_backend = self.app.state_backend
        seen = getattr(self._final_seen, "note", None)
        if seen is not None:
            self._final_seen.note = None  # served once, and only to the very next read
            note_id, raw, result, generation, at = seen
            if (
                note_id == invocation_id
                and generation == state_backend.prefetch_generation()
                and time.monotonic() - at <= _PREFETCH_TTL_SEC
            ):
                if result is not None:
                    state_backend.remember_result(invocation_id, result, generation)
                if self._read_ahead is not None:
                    self._read_ahead.read_now(invocation_id)
                return _record(raw)
        generation = state_backend.prefetch_generation()  # before the read: a purge may follow
        ahead = self._read_ahead
        kept = ahead.take(invocation_id, generation) if ahead is not None else None
        # The first read of an invocation this thread submitted: when not final, it
        # also registers the wait pynenc's `result` makes next (one round trip fewer).
        arm = kept is None and ahead is not None and ahead.pending(invocation_id)
        candidates = ahead.candidates(invocation_id) if ahead is not None and not kept else []
        more: list[tuple[str, Any, str | None]] = []
        if kept is not None:
            raw, result, generation = kept
        elif candidates:
            raw, result, more = self._retried(
                lambda: lifecycle.read_final_ahead(
                    invocation_id, candidates, _PREFETCH_RESULT_BYTES, arm
                ),
                f"invocation:{invocation_id}",
            )
        else:
            raw, result = self._retried(
                lambda: lifecycle.read_final(invocation_id, _PREFETCH_RESULT_BYTES, arm),
                f"invocation:{invocation_id}",
            )
        if result is not None:
            state_backend.remember_result(invocation_id, result, generation)
        record = _record(raw)
        if candidates and ahead is not None:
            ahead.read(candidates, record.status.is_final(), more, generation)
        return record
