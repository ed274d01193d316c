"""Claiming a decision: find the paused call, check the decider, record the decision with a
compare-and-set on the run, and, for a delegated call, route it down to the subagent.

A claim ends as the run (now ``running``, owned here) and the ``Plan`` the loop starts from: the call
to execute, or the decline to report, or the subagent's stream to follow. For a delegated call this
level claims first and the subagent second (``_route``), so a crash between the two leaves this level
ahead, and recovery re-attaches to the subagent to find out where it really stands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from troupe.core.deciding import decision_log
from troupe.core.deciding.approvers import ApproverPolicies, ApproverPolicy, check_decider, needs_more
from troupe.core.deciding.decisions import (
    Target,
    already_decided,
    apply,
    as_decision,
    audit_entry,
    check_kind,
    find_target,
)
from troupe.core.deciding.policy import RunPolicy
from troupe.core.run.calls import decline_chunk
from troupe.core.run.flow import ActiveRun, Plan
from troupe.core.run.loop import RunLoop
from troupe.core.tracing import record_wait
from troupe.core.vocabulary.errors import (
    DecisionConflictError,
    DecisionRejectedError,
    PauseExpiredError,
    SnapshotNotFoundError,
    ToolCallNotSuspendedError,
    TroupeError,
)
from troupe.core.vocabulary.requests import DecideRequest
from troupe.core.vocabulary.state import CallStatus, Clock, Pause, RunState, ToolCallState
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
        first attempt uses the state this host paused the run with, if it kept it (troupe.core.run.paused)."""
        kept = self.loop.paused.take(request.run_id)
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
        try:
            stored, target = await self._target(request, kept)
            state = stored.state
            if not expiring:
                _refuse_late(state, target, self.loop.clock)
            policy = None if expiring or state.parent is not None else self._policy(target.pause)
            if policy is not None:
                await self._check_policy(policy, stored.version, state, target, request)
            call = target.call
            delegated = call.tool_name in self.loop.delegations and call.child is not None
            # A delegated call is put back as it was if the subagent refuses the decision (see _route).
            before = call.model_copy(deep=True) if delegated else call
            entry = apply(state, target, request, None if delegated else self.loop.tools.get(call.tool_name))
        except StaleSnapshotError:
            return None
        except TroupeError:
            if kept is None:
                raise
            return None  # refused on the kept copy: nothing was written; decide again on a fresh read
        if expiring:
            assert call.decision is not None
            call.decision.kind = entry.kind = "expired"
        if policy is not None and policy.quorum > 1 and entry.kind == "approved":
            entry.approvals = [*target.pause.approvals, entry.decided_by or ""]
            entry.quorum = policy.quorum
        # In flight from here: a crash before the next checkpoint leaves it for recovery, not listed.
        state.status, state.owner = "running", self.owner
        try:
            # A delegated decision is audited once the subagent has accepted it (see _route).
            audit = () if delegated else (entry,)
            version = await self.loop.save(state, expected_version=stored.version, audit=audit, thread=thread)
        except StaleSnapshotError:
            return None
        _record(state, target, entry)
        run = ActiveRun(state, version, self._resumed_policy(state))
        if delegated:
            return run, await self._route(run, call, before, target.pause, request, entry)
        if call.status is CallStatus.RUNNING:
            return run, Plan(calls=(call.tool_call_id,))
        return run, Plan(backlog=(decline_chunk(state.run_id, call),))

    def _policy(self, pause: Pause) -> ApproverPolicy | None:
        return None if self.policies is None else self.policies.for_pause(pause)

    async def _check_policy(
        self, policy: ApproverPolicy, version: int, state: RunState, target: Target, request: DecideRequest
    ) -> None:
        """Refuse a decider the policy does not allow (``ApprovalPolicyError``, nothing written). An
        approval short of the quorum is counted (the call keeps waiting; audited and announced in the
        same write) and ends the claim with ``QuorumPending``."""
        pause = target.pause
        # Resume data answering an approval pause counts as the approval (or decline) it stands for.
        request = replace(request, decision=as_decision(pause, target.call.tool_call_id, request.decision))
        check_decider(policy, state, pause, request)
        if not needs_more(policy, pause, request):
            return
        pause.approvals.append(request.decided_by or "")
        entry = audit_entry(
            state,
            target,
            kind="approval-recorded",
            decided_by=request.decided_by,
            approvals=list(pause.approvals),
            quorum=policy.quorum,
        )
        await self.loop.save(state, expected_version=version, audit=(entry,))
        decision_log.decided(entry)  # logged as "decision ... decision=approval-recorded"
        raise QuorumPending(state)

    async def _target(self, request: DecideRequest, kept: StoredRun | None) -> tuple[StoredRun, Target]:
        """The run (``kept``, or read from the store) and the paused call a decision is for, or the error
        saying why there is none."""
        stored = kept or await self.store.load_run(request.run_id)
        if stored is None:
            raise await self._missing(request)
        if stored.state.agent_id != self.agent_id:
            # Another agent's run: its tools, schemas and opt-ins are not this agent's to check.
            raise await self._missing(request, foreign=True)
        try:
            target = find_target(stored.state, request)
        except ToolCallNotSuspendedError as exc:
            # A call of an earlier step may have been decided already (a retry after the run moved on).
            decided = await self._decided_before(request)
            if decided is None:
                raise
            raise decided from exc
        check_kind(stored.state.run_id, target, request)
        return stored, target

    async def _route(
        self,
        run: ActiveRun,
        call: ToolCallState,
        before: ToolCallState,
        pause: Pause,
        request: DecideRequest,
        entry: AuditEntry,
    ) -> Plan:
        """Hand a claimed decision down to the subagent that owns the call; the plan follows it there."""
        assert call.child is not None
        inner = DecideRequest(
            run_id=call.child.run_id,
            decision=request.decision,
            tool_call_id=pause.inner_tool_call_id,
            fingerprint=pause.inner_fingerprint,
            decided_by=request.decided_by,
        )
        follow = Plan(calls=(call.tool_call_id,), reattach=frozenset({call.tool_call_id}))
        try:
            stream = await self.loop.delegations[call.tool_name].port.decide(inner)
        except (DecisionRejectedError, SnapshotNotFoundError):
            # Refused below before anything was written there: put this level back as it was.
            await self._put_back(run, call, before)
            raise
        except (DecisionConflictError, ToolCallNotSuspendedError) as exc:
            # The subagent moved on already (a decision whose answer was lost to a crash): this level
            # follows it from here, and the caller hears that the call was decided before.
            raise ContinuedElsewhere(exc, run, follow) from exc
        except Exception:
            # The subagent could not answer (its actor died, storage failed mid-write): whether it took
            # the decision is unknown, so this level keeps its claim and follows the subagent's run
            # wherever it stands. Either way the decision is not lost: this level's claim is its durable
            # hand-off (troupe.core.deciding.handoff), which the subagent applies when its run is next
            # followed.
            # So it is audited here, once, and at once: the run may wait a long time for its subagent.
            log.warning(
                "routing a decision to run %s failed; following it instead", inner.run_id, exc_info=True
            )
            run.version = await self.store.save_run(run.state, expected_version=run.version, audit=(entry,))
            return follow
        return Plan(calls=(call.tool_call_id,), child_streams={call.tool_call_id: stream}, audit=(entry,))

    async def _put_back(self, run: ActiveRun, call: ToolCallState, before: ToolCallState) -> None:
        run.state.calls[run.state.calls.index(call)] = before
        run.state.status = "suspended"
        run.version = await self.store.save_run(run.state, expected_version=run.version)

    async def _decided_before(self, request: DecideRequest) -> DecisionConflictError | None:
        if request.tool_call_id is not None:
            for entry in await self.store.list_audit(request.run_id):
                if (
                    entry.tool_call_id == request.tool_call_id
                    and entry.agent_id == self.agent_id
                    and entry.kind != "approval-recorded"  # a quorum's count, not a decision
                ):
                    return already_decided(request.run_id, entry.tool_call_id, entry.kind, entry.decided_by)
        return None

    async def _missing(self, request: DecideRequest, foreign: bool = False) -> TroupeError:
        """No snapshot (of this agent's): say whether the call was decided already, else why there is
        nothing to resume."""
        decided = None if foreign else await self._decided_before(request)
        if decided is not None:
            return decided
        return SnapshotNotFoundError(
            f"snapshot not found for run {request.run_id} of agent {self.agent_id!r}: the run is unknown, "
            "has already finished, or was never checkpointed (is storage configured?)",
            run_id=request.run_id,
        )


def _refuse_late(state: RunState, target: Target, clock: Clock) -> None:
    """A human's decision after the pause's deadline is refused (only the top level enforces it)."""
    expires_at = target.pause.expires_at
    if state.parent is None and expires_at is not None and expires_at <= clock():
        raise PauseExpiredError(
            f"tool call {target.call.tool_call_id!r} of run {state.run_id} expired at "
            f"{expires_at.isoformat()}; it is declined for lack of a decision",
            run_id=state.run_id,
            tool_call_id=target.call.tool_call_id,
        )


def _record(state: RunState, target: Target, entry: AuditEntry) -> None:
    """Log the claimed decision and close the pause's wait span."""
    if state.parent is None:  # a nested decision is logged once, at the top, with its full path
        decision_log.decided(entry)
    record_wait(
        "troupe.approval_wait",
        target.pause.paused_at,
        state.trace,
        troupe__run_id=state.run_id,
        troupe__tool=target.pause.tool_name,
        troupe__tool_call_id=target.call.tool_call_id,
        troupe__decision=entry.kind,
        troupe__fingerprint=entry.fingerprint,
        troupe__decided_by=entry.decided_by,
    )


__all__ = ["Claims", "ContinuedElsewhere", "QuorumPending"]
