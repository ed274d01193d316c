"""Stopping a run: ending a run that was cancelled (or ran out of ``max_duration_s``), wherever it stood.

The host that holds the run ends it, in one of three ways:

- it was driving the run: its operation's task is cancelled in the model turn or the tool it was in,
  and the same operation ends the run, on the same stream (``Stopping.stopped``);
- the run was paused, or its host is gone: the host that recorded the cancel, or the one that takes
  the run over, opens an operation on it that only ends it (``Stopping.end``);
- it learns of a cancel recorded elsewhere when its next write loses the compare-and-set, or when it
  looks (each heartbeat, ``troupe.actors.host``): then as in the first.

Ending a run cancels every subagent run still open under it (and waits for each to end), closes the
calls it had in flight as cancelled, and ends the run: a top-level run's snapshot goes (its messages,
with the cancelled calls' errors, join its thread), a subagent's keeps a finished record that says it
was cancelled, for its parent. The stream ends with a ``finish`` whose ``finish_reason`` is
``cancelled`` (or ``max-duration``) and whose ``cancelled`` says who, why and when. Tools that finished
before their results were durable, and sync tools whose threads end later, are recorded in the audit
log as late outcomes (``troupe.core.run.late_results``); no model is given them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

from troupe.core.deciding.cancelling import cancelled_output, close, outcome, record
from troupe.core.run import late_results
from troupe.core.run.calls import done
from troupe.core.run.delegation import Delegation, child_run_id
from troupe.core.run.flow import ActiveRun, Finished, finish_payload
from troupe.core.run.writes import RunWriter
from troupe.core.vocabulary.errors import (
    RunCancelledError,
    RunNotCancellableError,
    SnapshotNotFoundError,
    StorageError,
)
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.messages import tool_message
from troupe.core.vocabulary.requests import CancelRequest
from troupe.core.vocabulary.state import CallStatus, Cancellation, RunState
from troupe.core.vocabulary.store import AuditEntry, StaleSnapshotError, Store, StoredRun

log = logging.getLogger(__name__)

_WRITE_ATTEMPTS = 10

# How the loop ends a run it holds: ``RunLoop._end(run, outcome, audit)``.
EndRun = Callable[[ActiveRun, dict[str, Any], tuple[AuditEntry, ...]], Awaitable[None]]


class Stopping:
    """Ends the stopped runs of one agent's loop, with the loop's store, writer, delegations and way of
    ending a run (``end_run``)."""

    def __init__(
        self, store: Store, writer: RunWriter, delegations: Mapping[str, Delegation], end_run: EndRun
    ) -> None:
        self.store = store
        self.writer = writer
        self.delegations = delegations
        self.end_run = end_run

    async def stopped(self, run: ActiveRun, cancellation: Cancellation) -> Finished:
        """End a run whose operation was cut short here (its task cancelled, or its write refused
        because the run was cancelled meanwhile). ``cancellation`` is recorded first if the run does
        not hold one yet (this host stopped it: its ``max_duration_s`` ran out)."""
        state = run.state
        in_flight = [c for c in state.calls if c.status is CallStatus.RUNNING]
        with contextlib.suppress(Exception):  # a write sent ahead landed or not: the store says which
            await run.wait_ahead()
        await self._record_late(run)
        stored = await self._holding_cancel(state, cancellation)
        said = stored.state.cancel if stored is not None and stored.state.cancel else cancellation
        for call in in_flight:
            done(run, call, cancelled_output(state.run_id, said), is_error=True, cancelled=True)
        if stored is None:  # ended already, or another host holds it now and ends it there
            return self._finish(run, said, list(state.messages))
        run.state, run.version = stored.state, stored.version
        return await self.end(run, said)

    async def end(self, run: ActiveRun, cancellation: Cancellation) -> Finished:
        """End a cancelled run this host holds, from its stored state (see the module's docstring)."""
        state = run.state
        await self._cascade(state, cancellation)
        for call in state.calls:
            if call.status is not CallStatus.DONE:
                close(state.run_id, call, cancellation)
        if state.calls:  # the step's assistant turn gets its calls' (cancelled) results: a whole turn
            state.messages.extend(tool_message(c.tool_call_id, c.output) for c in state.calls)
            state.calls = []
        messages = list(state.messages)
        try:
            await self.end_run(run, outcome(cancellation), ())
        except (StorageError, StaleSnapshotError):
            # The cancel is durable: whoever next holds the run (recovery) ends it.
            log.warning("cancelled run %s could not be ended now; it ends when recovered", state.run_id)
        return self._finish(run, cancellation, messages)

    async def cancelled_meanwhile(self, run: ActiveRun, error: BaseException) -> Cancellation | None:
        """The cancel that made this operation's write fail, if that is why it failed."""
        if not isinstance(error, StaleSnapshotError):
            return None
        try:
            stored = await self.store.load_run(run.state.run_id)
        except StorageError:
            return None
        return stored.state.cancel if stored is not None else None

    # ---- the parts -----------------------------------------------------------------------------------

    def _finish(
        self, run: ActiveRun, cancellation: Cancellation, messages: list[dict[str, object]]
    ) -> Finished:
        reason = cancellation.finish_reason
        told = outcome(cancellation)["cancelled"]
        run.chunk("finish", **finish_payload(run.state, reason, ""), cancelled=told, messages=messages)
        return Finished(reason)

    async def _record_late(self, run: ActiveRun) -> None:
        """Tools this operation ran whose results were not durable yet: kept in the audit log."""
        if not run.ran:
            return
        try:
            await late_results.append(
                self.store, run.state, run.ran, "the run was stopped before it was saved"
            )
        except StorageError:
            log.error(
                "run %s: outcomes of tools that ran before it stopped were not recorded", run.state.run_id
            )
        run.ran.clear()

    async def _holding_cancel(self, state: RunState, cancellation: Cancellation) -> StoredRun | None:
        """The run as stored, holding a cancel (``cancellation`` written into it if it holds none);
        None if it is gone or another host holds it now."""
        for _ in range(_WRITE_ATTEMPTS):
            stored = await self.store.load_run(state.run_id)
            if stored is None or stored.state.owner != state.owner:
                return None
            if stored.state.cancel is not None:
                return stored
            entries = record(stored.state, cancellation, "system")
            try:
                version = await self.writer.save(stored.state, expected_version=stored.version, audit=entries)
            except StaleSnapshotError:
                continue
            return StoredRun(stored.state, version)
        raise StaleSnapshotError(f"run {state.run_id} kept changing while it was being stopped")

    async def _cascade(self, state: RunState, cancellation: Cancellation) -> None:
        """Cancel every subagent run of the step in progress, and wait for each to end."""
        delegations = self.delegations
        children = [
            (delegations[call.tool_name], child_run_id(state.run_id, call.tool_call_id))
            for call in state.calls
            if call.tool_name in delegations
        ]
        if not children:
            return
        who = cancellation.by
        request = CancelRequest(
            run_id="",
            reason=cancellation.reason,  # the run cancelled above is named by its own audit entry
            canceller=Principal(who.subject, who.issuer, who.name) if who is not None else None,
            surface="system",
            cascade=True,
            finish_reason=cancellation.finish_reason,
        )
        await asyncio.gather(*(_cancel_child(d, run_id, request) for d, run_id in children))


async def _cancel_child(delegation: Delegation, run_id: str, request: CancelRequest) -> None:
    """Cancel one subagent run (one that has ended already is left as it is) and follow it to its end."""
    port = delegation.port
    try:
        await port.cancel(replace(request, run_id=run_id))
    except (SnapshotNotFoundError, RunNotCancellableError, RunCancelledError):
        pass  # never started, over already, or cancelled already (then it is ending: followed below)
    except Exception:
        log.warning("cancelling subagent run %s failed; it is ended when recovered", run_id, exc_info=True)
    try:
        batches = await port.attach(run_id)
        if batches is not None:
            async for _ in batches:
                pass
    except Exception:
        log.warning("subagent run %s could not be followed to its end", run_id, exc_info=True)


__all__ = ["Stopping"]
