"""Calls in doubt after a takeover: fenced by their deadline, and completed by their first host's result.

A host whose lease ran out (cut off from the store, say) may still be running a tool when another
host takes its run over. For a gated call, the new host asks its person again, but the call is *in
doubt*: its first host may yet finish it. So its pause says so (``InDoubt``: that host, its last write
of the run, the call's deadline) and nobody can run it again or decline it before the deadline (the
tool's ``timeout_s``, or ``in_doubt_default_s`` for a tool without one, counted from when the call
started, plus ``in_doubt_margin_s``), unless the first host's outcome arrives first
(``ToolCallInDoubtError``, 409, names the deadline: ``troupe.core.deciding.decisions``; a cancel of
the run is always taken).

When the tool ends on its first host, that host cannot write the run any more: it appends the
outcome to the run's audit log (``troupe.core.run.late_results``) and, if the call is still in doubt
there, takes the run back with a compare-and-set and goes on with the real result (``TakeBack``), so
the run does not wait for a person who has nothing left to decide; whoever waited on that host hears
how the run really ended. If the run has moved on, that host says exactly where it went instead. A
call whose host is this one (its actor restarted) is not in doubt: the process that ran it is gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from troupe.core.run import late_results
from troupe.core.run.flow import ActiveRun, Plan
from troupe.core.run.writes import RunWriter
from troupe.core.vocabulary.errors import RunTakenOverError, StorageError
from troupe.core.vocabulary.state import PAUSED, CallStatus, InDoubt, RunState, ToolCallState
from troupe.core.vocabulary.store import AuditEntry, StaleSnapshotError, Store, StoredRun
from troupe.core.vocabulary.tools import Tool

log = logging.getLogger(__name__)

# How long a host keeps trying to record a late outcome while the store is out of reach.
_RECORD_FOR_S = 60.0


def fence(
    call: ToolCallState,
    tool: Tool,
    owner: str | None,
    last_seen: datetime,
    default_s: float,
    margin_s: float,
) -> InDoubt:
    """The in-doubt mark of ``call``, taken over from ``owner`` (its host, which may still run it, and
    whose last write of the run was at ``last_seen``)."""
    started = call.started_at or last_seen
    limit = tool.timeout_s if tool.timeout_s is not None else default_s
    deadline = started + timedelta(seconds=limit + margin_s)
    return InDoubt(owner=owner, last_seen=last_seen, deadline=deadline)


class TakeBack:
    """What the host that lost a run does with the tools it ran meanwhile (see the module's docstring)."""

    def __init__(self, store: Store, writer: RunWriter) -> None:
        self.store = store
        self.writer = writer
        # Outcomes of tools that completed here but could not be recorded (the store failed), by run:
        # kept until they are, so that whoever next drives the run takes them instead of asking a person
        # again about a call that did run (``record_kept``).
        self.kept: dict[str, list[AuditEntry]] = {}

    async def after_loss(self, run: ActiveRun, error: Exception) -> Plan | RunTakenOverError | None:
        """This operation's write failed and tools ran here meanwhile: record their outcomes, then take
        the run back and go on (the plan to go on with; ``run`` holds the run again), or say where the
        run went. None if nothing ran here, or the failure was not a lost run."""
        ran = list(run.ran)
        if not ran or not isinstance(error, StaleSnapshotError | StorageError):
            return None
        lost = isinstance(error, StaleSnapshotError)  # the store answered: another host holds the run
        entries = await self._record(run.state, ran, patience=_RECORD_FOR_S if lost else 0.0)
        run.ran.clear()
        if entries is None or not lost:
            # The store failed: the caller hears so; recovery, later, takes what was recorded.
            return None
        try:
            stored = await self.store.load_run(run.state.run_id)
        except StorageError:
            stored = None
        plan = await self._retake(run, stored, entries) if stored is not None else None
        if plan is not None:
            return plan
        return _told(run.state, stored.state if stored is not None else None, entries)

    async def _record(
        self, state: RunState, ran: Sequence[ToolCallState], patience: float
    ) -> list[AuditEntry] | None:
        """Append the outcomes to the run's audit log, waiting out an outage of the store for up to
        ``patience`` seconds. Outcomes still not recorded then are kept here (``record_kept``)."""
        entries = late_results.outcomes(state, ran)
        deadline = asyncio.get_running_loop().time() + patience
        while True:
            try:
                for entry in entries:
                    await self.store.append_audit(entry)
                return entries
            except StorageError:
                if asyncio.get_running_loop().time() > deadline:
                    log.error(
                        "run %s: outcomes of tools that completed here are not recorded yet; kept until "
                        "the store takes them",
                        state.run_id,
                    )
                    self.kept.setdefault(state.run_id, []).extend(entries)
                    return None
                await asyncio.sleep(0.5)

    async def record_kept(self, run_id: str) -> None:
        """Record the outcomes kept for ``run_id`` in its audit log, where recovery and decisions find
        them (``troupe.core.run.late_results``). The caller holds the run's lock. Raises what the store
        raises; what is not recorded stays kept."""
        entries = self.kept.get(run_id, [])
        while entries:
            await self.store.append_audit(entries[0])
            entries.pop(0)
        self.kept.pop(run_id, None)

    async def _retake(self, run: ActiveRun, stored: StoredRun, entries: list[AuditEntry]) -> Plan | None:
        """Take the run back if it waits on these very calls, in doubt: their outcomes complete them."""
        state = stored.state
        waiting = [state.call(e.tool_call_id) for e in entries]
        if state.status != "suspended" or state.cancel is not None:
            return None
        if any(c is None or c.status not in PAUSED or c.in_doubt is None for c in waiting):
            return None
        backlog = []
        for call, entry in zip(waiting, entries, strict=True):
            assert call is not None
            call.in_doubt = None
            backlog.append(late_results.use_completed(state.run_id, call, entry))
        state.stop_waiting()
        state.status, state.owner = "running", run.state.owner
        try:
            version = await self.writer.save(state, expected_version=stored.version)
        except (StaleSnapshotError, StorageError):
            return None
        run.state, run.version = state, version
        log.info("run %s taken back by %s with the outcome of %s", state.run_id, state.owner, len(entries))
        return Plan(backlog=tuple(backlog))


def _told(mine: RunState, stored: RunState | None, entries: list[AuditEntry]) -> RunTakenOverError:
    """What the caller waiting on the host that lost the run is told: exactly where the run went."""
    said = "; ".join(
        f"{e.tool_name!r} (call {e.tool_call_id}) completed at {e.decided_at.isoformat()}" for e in entries
    )
    if stored is None:
        fate = "the run has ended meanwhile, so the outcome is kept in its audit log only"
    elif stored.cancel is not None:
        fate = "the run was cancelled meanwhile, so the outcome is kept in its audit log only"
    else:
        fates = [_fate(stored.call(e.tool_call_id)) for e in entries]
        fate = "; ".join(dict.fromkeys(fates))
    return RunTakenOverError(
        f"run {mine.run_id} was taken over by another host while its tools ran here: {said}; {fate}",
        run_id=mine.run_id,
        outcomes=[
            {"tool_call_id": e.tool_call_id, "completed_at": e.decided_at.isoformat(), "result": e.result}
            for e in entries
        ],
    )


def _fate(call: ToolCallState | None) -> str:
    if call is None:
        return "the run had moved on past the call, so the outcome is kept in its audit log only"
    decision = call.decision
    by = f" by {decision.decided_by}" if decision is not None and decision.decided_by else ""
    if call.status in PAUSED:
        return "the call still waits there (the outcome is recorded: deciding it takes the outcome)"
    if call.status is CallStatus.RUNNING:
        return "the call is still marked running there: the run goes on there with this outcome"
    if decision is not None and decision.kind in ("declined", "expired", "cancelled"):
        return f"the call had been {decision.kind}{by} there, so the outcome is kept in the audit log only"
    return "the run there had settled the call otherwise; the outcome is kept in the audit log only"


__all__ = ["TakeBack", "fence"]
