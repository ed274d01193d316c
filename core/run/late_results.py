"""Tool results that come back late: after their run was taken over, stopped, or their call timed out.

A host whose lease ran out (say, through a storage outage) can still be running an approved tool when
another host takes its run over: that host sees the call interrupted and, if it is gated, asks its human
again (the call in doubt: ``troupe.core.run.in_doubt``). When the tool then finishes, its outcome must
not be lost: its host cannot write the run (the compare-and-set fails: the run is not its any more), so
it appends a ``completed`` entry to the run's audit log, which needs no compare-and-set. Whoever holds
the run uses that entry instead of the call's interruption: recovery takes the result as the call's,
the host that ran it takes the run back with it while the call is in doubt, and a decision on the call
asked again is answered that it completed (``ToolCallCompletedError``), the run going on with the result.
A tool that completed while the store was failing (the write of its result failed too) is kept by its
host (``TakeBack.kept``) and recorded the same way once the store takes it: at the host's next heartbeat,
or before the host picks the run up again, whichever comes first.

A tool whose call was given up (its run was cancelled, or it timed out) leaves a ``completed`` entry
too if it ends after all (a sync tool's thread cannot be stopped: ``LateOutcomes``), its ``reason``
saying why it came late; no model is given it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from troupe.core.run.outcomes import record_result
from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.errors import ToolCallCompletedError
from troupe.core.vocabulary.state import RunState, ToolCallState, fingerprint, utcnow
from troupe.core.vocabulary.store import AuditEntry, Store
from troupe.core.vocabulary.tool_threads import Late
from troupe.core.vocabulary.tools import to_jsonable

log = logging.getLogger(__name__)


def call_fingerprint(call: ToolCallState) -> str:
    """The call as it ran: a completed entry belongs to the call with these id, tool and arguments."""
    return fingerprint(call.tool_call_id, call.tool_name, call.effective_args)


async def append(
    store: Store, state: RunState, calls: Sequence[ToolCallState], why: str | None = None
) -> list[AuditEntry]:
    """Append each call's outcome (``call.output``) to the run's audit log, noting ``why`` it is late."""
    entries = outcomes(state, calls, why)
    for entry in entries:
        await store.append_audit(entry)
    return entries


def outcomes(state: RunState, calls: Sequence[ToolCallState], why: str | None = None) -> list[AuditEntry]:
    """Each call's outcome (``call.output``) as the ``completed`` entry that records it, taken now."""
    return [_entry(state, call, utcnow(), why) for call in calls]


def _entry(state: RunState, call: ToolCallState, at: datetime, why: str | None = None) -> AuditEntry:
    return AuditEntry(
        reason=why,
        run_id=state.run_id,
        agent_id=state.agent_id,
        tool_call_id=call.tool_call_id,
        tool_name=call.tool_name,
        args=call.effective_args,
        fingerprint=call_fingerprint(call),
        kind="completed",
        result=call.output,
        is_error=call.is_error,
        decided_at=at,
        decided_by=state.owner,
        resource_id=state.resource_id,
    )


def completed(audit: Iterable[AuditEntry], call: ToolCallState) -> AuditEntry | None:
    """The late outcome recorded for ``call``, if its tool did complete."""
    mine = call_fingerprint(call)
    return next((e for e in audit if e.kind == "completed" and e.fingerprint == mine), None)


def use_completed(run_id: str, call: ToolCallState, entry: AuditEntry) -> Chunk:
    """The call's outcome is the recorded one (mutates ``call``); the chunk that reports it."""
    call.pauses, call.decision, call.in_doubt = [], None, None
    return record_result(
        run_id, call, entry.result, bool(entry.is_error), completed_at=entry.decided_at.isoformat()
    )


def already_completed(run_id: str, entry: AuditEntry) -> ToolCallCompletedError:
    return ToolCallCompletedError(
        f"tool call {entry.tool_call_id!r} ({entry.tool_name!r}) of run {run_id} completed at "
        f"{entry.decided_at.isoformat()} with result {_short(entry.result)}; it is not run again, and the "
        "run goes on with that result",
        run_id=run_id,
        tool_call_id=entry.tool_call_id,
        completed_at=entry.decided_at.isoformat(),
        result=entry.result,
    )


def _short(value: object, limit: int = 200) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "\u2026"


class LateOutcomes:
    """Records what sync tools return after their caller gave up on them (the run was stopped, or the
    call timed out: a thread cannot be stopped). The outcome goes to the run's audit log as a
    ``completed`` entry whose ``reason`` says why it came late; no model is given it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._writing: set[asyncio.Task[None]] = set()

    def later(self, state: RunState, call: ToolCallState, why: Callable[[], str]) -> Late:
        """What to tell the tool's thread pool: ``why()`` is asked once the outcome arrives."""
        # Every sync call asks for this and almost none comes late: only the call is copied now (as it
        # is: the run changes it meanwhile), through its JSON (a third of a deepcopy's cost), and the
        # rest waits for an outcome to arrive.
        run_id, agent_id, resource_id, owner = state.run_id, state.agent_id, state.resource_id, state.owner
        ran = ToolCallState.model_validate_json(call.model_dump_json())

        def arrived(output: Any, error: BaseException | None) -> None:
            run = RunState(run_id=run_id, agent_id=agent_id, resource_id=resource_id, owner=owner)
            if error is not None:
                ran.output, ran.is_error = {"error": f"{type(error).__name__}: {error}"}, True
            else:
                ran.output, ran.is_error = to_jsonable(output), False
            task = asyncio.get_running_loop().create_task(self._write(run, ran, why()))
            self._writing.add(task)
            task.add_done_callback(self._writing.discard)

        return arrived

    async def _write(self, state: RunState, call: ToolCallState, why: str) -> None:
        try:
            await append(self.store, state, [call], why)
        except Exception:
            log.error("run %s: the late outcome of call %s was not recorded", state.run_id, call.tool_call_id)

    async def drain(self) -> None:
        """Wait for the outcomes being written (tests, and a host shutting down)."""
        while self._writing:
            await asyncio.gather(*self._writing, return_exceptions=True)


__all__ = [
    "LateOutcomes",
    "already_completed",
    "append",
    "call_fingerprint",
    "completed",
    "outcomes",
    "use_completed",
]
