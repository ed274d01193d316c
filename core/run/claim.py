"""Claiming a decision: rule on it against the run, record it with a compare-and-set, and, for a
delegated call, route it down to the subagent.

``Claims.claim`` reads top to bottom: the run (the copy this host kept when it paused it, or a read),
the ruling (``troupe.core.deciding.decisions.rule``: every check, then the decision applied to the
state), the write that claims it, and the ``Plan`` the loop starts from: the call to execute, the
decline to report, or the subagent's stream to follow. For a delegated call this level claims first and
the subagent second (``_route``), so a crash between the two leaves this level ahead, and recovery
re-attaches to the subagent to find out where it really stands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NoReturn

from troupe.core.deciding import decision_log
from troupe.core.deciding.approvers import ApproverPolicies
from troupe.core.deciding.cancelling import as_recorded, cancelled_error
from troupe.core.deciding.decisions import Applied, Counted, Ruling, already_decided, rule
from troupe.core.run import late_results
from troupe.core.run.flow import ActiveRun, Plan
from troupe.core.run.loop import RunLoop
from troupe.core.run.outcomes import decline_chunk
from troupe.core.tracing import record_wait
from troupe.core.vocabulary.errors import (
    DecisionConflictError,
    DecisionInterruptedError,
    DecisionRejectedError,
    SnapshotNotFoundError,
    ToolCallInDoubtError,
    ToolCallNotSuspendedError,
    TroupeError,
)
from troupe.core.vocabulary.options import RunPolicy
from troupe.core.vocabulary.requests import DecideRequest
from troupe.core.vocabulary.state import CallStatus, RunState, ToolCallState, utcnow
from troupe.core.vocabulary.store import AuditEntry, StaleSnapshotError, StoredRun, ThreadAppend

log = logging.getLogger(__name__)

_CLAIM_ATTEMPTS = 5


class ContinuedElsewhere(Exception):
    """The subagent had taken a decision on this call already: the run follows it (``plan``) and the
    caller hears ``error``."""

    def __init__(self, error: TroupeError, run: ActiveRun, plan: Plan) -> None:
        super().__init__(str(error))
        self.error = error
        self.run = run
        self.plan = plan


class QuorumPending(Exception):
    """An approval was counted towards its quorum; the call still waits (the run is unchanged)."""

    def __init__(self, state: RunState) -> None:
        super().__init__(state.run_id)
        self.state = state


class Claims:
    """Claims decisions on the runs of one agent, for the host ``owner``."""

    def __init__(
        self,
        loop: RunLoop,
        owner: str,
        policies: ApproverPolicies | None,
        resumed_policy: Callable[[RunState], RunPolicy],
    ) -> None:
        self.loop = loop
        self.store = loop.store
        self.agent_id = loop.spec.id
        self.owner = owner
        self.policies = policies
        self._resumed_policy = resumed_policy

    async def claim(
        self, request: DecideRequest, expiring: bool = False, thread: ThreadAppend | None = None
    ) -> tuple[ActiveRun, Plan]:
        """Claim the decision, retrying while the run changes under it; raises why it cannot be. The
        first attempt uses the state this host paused the run with, if it kept it
        (troupe.core.run.paused)."""
        kept = self.loop.paused.pop(request.run_id)
        for _ in range(_CLAIM_ATTEMPTS):
            claimed = await self._attempt(request, expiring, thread, kept)
            kept = None
            if claimed is not None:
                return claimed
        raise StaleSnapshotError(f"run {request.run_id} kept changing while a decision was claimed; retry")

    async def _attempt(
        self, request: DecideRequest, expiring: bool, thread: ThreadAppend | None, kept: StoredRun | None
    ) -> tuple[ActiveRun, Plan] | None:
        """One compare-and-set; None if the run changed since it was read (or since ``kept`` was)."""
        stored = kept or await self._load(request)
        try:
            ruling = self._rule(stored.state, request, expiring)
        except TroupeError as exc:
            if kept is not None:
                return None  # refused on the kept copy: nothing was written; decide again on a fresh read
            if isinstance(exc, ToolCallInDoubtError):
                # Unless the outcome of its first host has come meanwhile: then the run goes on with it.
                call = stored.state.call(str(exc.details.get("tool_call_id")))
                try:
                    if call is not None:
                        await self._completed_meanwhile(stored, call)
                except StaleSnapshotError:
                    return None
                raise
            if isinstance(exc, ToolCallNotSuspendedError):
                # A call of an earlier step may have been decided already (a retry after the run moved on).
                raise await self._decided_before(request, stored.state) or exc from exc
            raise
        try:
            if isinstance(ruling, Counted):
                await self._count(stored, ruling)
            return await self._write_applied(stored, ruling, request, thread)
        except StaleSnapshotError:
            return None

    async def _load(self, request: DecideRequest) -> StoredRun:
        """The run a decision is for; the error saying why there is none."""
        stored = await self.store.load_run(request.run_id)
        if stored is None:
            raise await self._missing(request)
        if stored.state.agent_id != self.agent_id:
            # Another agent's run: its tools, schemas and opt-ins are not this agent's to check.
            raise await self._missing(request, foreign=True)
        return stored

    def _rule(self, state: RunState, request: DecideRequest, expiring: bool) -> Ruling:
        loop = self.loop
        return rule(
            state,
            request,
            tools=loop.tools,
            delegations=loop.delegations,
            policies=self.policies,
            now=loop.clock(),
            expiring=expiring,
        )

    async def _count(self, stored: StoredRun, counted: Counted) -> NoReturn:
        """Write an approval short of its quorum (audited and announced in the same write): the call
        keeps waiting, and the claim ends with ``QuorumPending``."""
        state = stored.state
        await self.loop.writer.save(state, expected_version=stored.version, audit=(counted.entry,))
        decision_log.decided(counted.entry)  # logged as "decision ... decision=approval-recorded"
        raise QuorumPending(state)

    async def _write_applied(
        self, stored: StoredRun, applied: Applied, request: DecideRequest, thread: ThreadAppend | None
    ) -> tuple[ActiveRun, Plan]:
        """Write the applied decision: the run is in flight from here, owned by this host (a crash before
        the next checkpoint leaves it for recovery, not listed)."""
        state, entry, call = stored.state, applied.entry, applied.target.call
        if applied.target.pause.interrupted:
            await self._completed_meanwhile(stored, call)
        state.stop_waiting()
        state.status, state.owner = "running", self.owner
        # A delegated decision is audited once the subagent has accepted it (see _route).
        audit = () if applied.delegated else (entry,)
        version = await self.loop.writer.save(
            state, expected_version=stored.version, audit=audit, thread=thread
        )
        _record(state, applied)
        run = ActiveRun(state, version, self._resumed_policy(state))
        if applied.delegated:
            return run, await self._route(run, applied, request)
        if call.status is CallStatus.RUNNING:
            return run, Plan(calls=(call.tool_call_id,))
        return run, Plan(backlog=(decline_chunk(state.run_id, call),))

    async def _completed_meanwhile(self, stored: StoredRun, call: ToolCallState) -> None:
        """A call asked about again after a takeover may have completed after all, on the host that lost
        the run (troupe.core.run.late_results): then it is not run again, whatever the decision; the run
        goes on with the recorded result, and the decider hears so (``ContinuedElsewhere``)."""
        state = stored.state
        late = late_results.completed(await self.store.list_audit(state.run_id), call)
        if late is None:
            return
        outcome = late_results.use_completed(state.run_id, call, late)
        state.stop_waiting()
        state.status, state.owner = "running", self.owner
        version = await self.loop.writer.save(state, expected_version=stored.version)
        run = ActiveRun(state, version, self._resumed_policy(state))
        raise ContinuedElsewhere(
            late_results.already_completed(state.run_id, late), run, Plan(backlog=(outcome,))
        )

    async def _route(self, run: ActiveRun, applied: Applied, request: DecideRequest) -> Plan:
        """Hand a claimed decision down to the subagent that owns the call; the plan follows it there."""
        call, pause = applied.target.call, applied.target.pause
        assert call.child is not None and applied.before is not None
        inner = DecideRequest(
            run_id=call.child.run_id,
            decision=request.decision,
            tool_call_id=pause.inner_tool_call_id,
            fingerprint=pause.inner_fingerprint,
            decider=request.decider,
            surface=request.surface,
            routed=True,
        )
        follow = Plan(calls=(call.tool_call_id,), reattach=frozenset({call.tool_call_id}))
        try:
            stream = await self.loop.delegations[call.tool_name].port.decide(inner)
        except (DecisionRejectedError, SnapshotNotFoundError) as exc:
            # Refused below before anything was written there: put this level back as it was. A decision
            # that may have taken effect below goes back marked interrupted, as it is there.
            await self._put_back(run, applied, interrupted=isinstance(exc, DecisionInterruptedError))
            raise
        except (DecisionConflictError, ToolCallNotSuspendedError) as exc:
            # The subagent moved on already (a decision whose answer was lost to a crash): this level
            # follows it from here, and the caller hears that the call was decided before.
            raise ContinuedElsewhere(exc, run, follow) from exc
        except Exception:
            return await self._follow_unreachable(run, applied, inner, follow)
        return Plan(
            calls=(call.tool_call_id,), child_streams={call.tool_call_id: stream}, audit=(applied.entry,)
        )

    async def _follow_unreachable(
        self, run: ActiveRun, applied: Applied, inner: DecideRequest, follow: Plan
    ) -> Plan:
        """The subagent could not answer (its actor died, storage failed mid-write): whether it took the
        decision is unknown, so this level keeps its claim and follows the subagent's run wherever it
        stands. Either way the decision is not lost: this level's claim is its durable hand-off
        (troupe.core.deciding.handoff), which the subagent applies when its run is next followed. So it
        is audited here, once, and at once: the run may wait a long time for its subagent."""
        log.warning("routing a decision to run %s failed; following it instead", inner.run_id, exc_info=True)
        run.version = await self.store.save_run(
            run.state, expected_version=run.version, audit=(applied.entry,)
        )
        return follow

    async def _put_back(self, run: ActiveRun, applied: Applied, *, interrupted: bool = False) -> None:
        before = applied.before
        assert before is not None
        if interrupted:
            before.mark_interrupted(applied.target.pause.fingerprint)
        calls = run.state.calls
        calls[calls.index(applied.target.call)] = before
        run.state.status = "suspended"
        run.state.updated_at = utcnow()  # it waits again from now (see RunState.stop_waiting)
        run.version = await self.store.save_run(run.state, expected_version=run.version)

    async def _decided_before(
        self, request: DecideRequest, state: RunState | None = None
    ) -> DecisionConflictError | None:
        """The audit's say on the call ``request`` names, if it was decided before (a call that waits in
        ``state`` was not: it is on another pause now)."""
        waiting = {c.tool_call_id for c in state.paused_calls()} if state is not None else set()
        if request.tool_call_id is None or request.tool_call_id in waiting:
            return None
        return decided_in(await self.store.list_audit(request.run_id), request, self.agent_id)

    async def _missing(self, request: DecideRequest, foreign: bool = False) -> TroupeError:
        """No snapshot (of this agent's): say whether the call was decided already, else why there is
        nothing to resume: the run finished (its decisions are on record), or it is unknown."""
        audit = [] if foreign else await self.store.list_audit(request.run_id)
        decided = decided_in(audit, request, self.agent_id)
        if decided is not None:
            return decided
        cancel = next((e for e in audit if e.kind == "cancelled" and not e.tool_call_id), None)
        if cancel is not None and cancel.agent_id == self.agent_id:
            return cancelled_error(
                request.run_id, as_recorded(cancel), "nothing in it can be decided any more"
            )
        if any(entry.agent_id == self.agent_id for entry in audit):
            why = "the run has finished: nothing in it waits for a decision"
        else:
            why = (
                "the run is unknown, has already finished, or was never checkpointed (is storage configured?)"
            )
        run = f"run {request.run_id} of agent {self.agent_id!r}"
        return SnapshotNotFoundError(f"snapshot not found for {run}: {why}", run_id=request.run_id)


def decided_in(
    audit: list[AuditEntry], request: DecideRequest, agent_id: str
) -> DecisionConflictError | None:
    """The audit's say on the call ``request`` names: the conflict it was decided (or cancelled)
    before, if it was."""
    for entry in audit:
        if (
            entry.tool_call_id == request.tool_call_id
            and entry.agent_id == agent_id
            and entry.kind != "approval-recorded"  # a quorum's count, not a decision
        ):
            return already_decided(
                request.run_id, entry.tool_call_id, entry.kind, entry.decided_by, entry.reason
            )
    return None


def _record(state: RunState, applied: Applied) -> None:
    """Log the claimed decision and close the pause's wait span."""
    entry, pause = applied.entry, applied.target.pause
    if state.parent is None:  # a nested decision is logged once, at the top, with its full path
        decision_log.decided(entry)
    record_wait(
        "troupe.approval_wait",
        pause.paused_at,
        state.trace,
        troupe__run_id=state.run_id,
        troupe__tool=pause.tool_name,
        troupe__tool_call_id=applied.target.call.tool_call_id,
        troupe__decision=entry.kind,
        troupe__fingerprint=entry.fingerprint,
        troupe__decided_by=entry.decided_by,
    )


__all__ = ["Claims", "ContinuedElsewhere", "QuorumPending", "decided_in"]
