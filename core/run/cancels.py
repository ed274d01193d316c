"""Claiming a cancel: record it in the run with a compare-and-set, before it is acknowledged.

``Cancels.cancel`` reads the run, checks the request (the run is this agent's and not over; the
canceller may cancel it; the call it names, if any, still waits with the fingerprint it gives) and
writes the cancel into the run in one compare-and-set, the same write that withdraws every open pause
(``troupe.core.deciding.cancelling``). A write that loses to another (a decision, a checkpoint) reads again
and tries again; a decision that loses to it finds the run cancelled (``RunCancelledError``). So a
cancel and an approval of the same call have exactly one winner, as two approvals do.

Who ends the run then depends on where it stood. A paused run, one this host holds, or one whose host
is gone is taken by this host (``CancelRecorded.taken``), which ends it. A run another live host drives is
left to that host, which stops it as soon as it learns: told directly when it can be reached, else at
its next write (the compare-and-set fails) or its next heartbeat.
"""

from __future__ import annotations

from dataclasses import dataclass

from troupe.core.deciding import decision_log
from troupe.core.deciding.approvers import ApproverPolicies, check_canceller
from troupe.core.deciding.cancelling import DEFAULT_REASON, as_recorded, cancelled_error, record
from troupe.core.deciding.decisions import find_target
from troupe.core.run.claim import decided_in
from troupe.core.run.loop import RunLoop
from troupe.core.vocabulary.errors import (
    RunNotCancellableError,
    SnapshotNotFoundError,
    ToolCallNotSuspendedError,
    TroupeError,
)
from troupe.core.vocabulary.requests import CancelledRun, CancelRequest, DecideRequest, Decline
from troupe.core.vocabulary.state import Cancellation, RunState
from troupe.core.vocabulary.store import AuditEntry, StaleSnapshotError, Store, StoredRun

_ATTEMPTS = 20


@dataclass(frozen=True)
class CancelRecorded:
    """A cancel that is durable: what to answer, and whether this host took the run to end it."""

    answer: CancelledRun
    cancellation: Cancellation
    taken: bool


class Cancels:
    """Claims cancels on the runs of one agent, for the host ``owner``."""

    def __init__(self, loop: RunLoop, owner: str, policies: ApproverPolicies | None) -> None:
        self.loop = loop
        self.store = loop.store
        self.agent_id = loop.spec.id
        self.owner = owner
        self.policies = policies

    async def cancel(self, request: CancelRequest) -> CancelRecorded:
        """Record the cancel (see the module's docstring); raises why it cannot be."""
        for _ in range(_ATTEMPTS):
            stored = await self.store.load_run(request.run_id)
            if stored is None or stored.state.agent_id != self.agent_id:
                gone = await self._gone(request, foreign=stored is not None)
                if isinstance(gone, CancelRecorded):
                    return gone
                raise gone
            again = _repeated(request, stored.state.agent_id, stored.state.cancel)
            if again is not None:
                return again
            recorded = await self._attempt(stored, request)
            if recorded is not None:
                return recorded
        raise StaleSnapshotError(f"run {request.run_id} kept changing while it was being cancelled; retry")

    async def _attempt(self, stored: StoredRun, request: CancelRequest) -> CancelRecorded | None:
        """One compare-and-set; None if the run changed since it was read."""
        state = stored.state
        await self._check(state, request)
        was = state.status
        taken = was == "suspended" or state.owner == self.owner or not await self._driven(state)
        canceller = request.canceller
        cancellation = Cancellation(
            reason=request.reason or DEFAULT_REASON,
            by=canceller.identity() if canceller is not None else None,
            finish_reason=request.finish_reason,
        )
        entries = record(state, cancellation, request.surface)
        if taken:
            state.status, state.owner = "running", self.owner
        try:
            await self.loop.writer.save(state, expected_version=stored.version, audit=entries)
        except StaleSnapshotError:
            return None
        if state.parent is None:
            decision_log.cancelled(entries[0])
        answer = CancelledRun.of(state.run_id, state.agent_id, cancellation, was)
        return CancelRecorded(answer, cancellation, taken)

    async def _check(self, state: RunState, request: CancelRequest) -> None:
        await check_cancel(self.store, self.policies, state, request)

    async def _driven(self, state: RunState) -> bool:
        """Whether a live host other than this one holds the run in flight."""
        return state.status == "running" and state.owner in await self.store.live_owners()

    async def _gone(self, request: CancelRequest, foreign: bool) -> TroupeError | CancelRecorded:
        """Why a run that is not stored cannot be cancelled: cancelled or finished (its audit log says
        so), or unknown; or, for a retry of the cancel that ended it, that cancel's answer."""
        audit: list[AuditEntry] = [] if foreign else await self.store.list_audit(request.run_id)
        if request.tool_call_id is not None:  # the call the canceller saw: who decided it first
            seen = DecideRequest(request.run_id, Decline(), request.tool_call_id, request.fingerprint)
            decided = decided_in(audit, seen, self.agent_id)
            if decided is not None:
                return decided
        for entry in audit:
            if entry.kind == "cancelled" and not entry.tool_call_id and entry.agent_id == self.agent_id:
                recorded = as_recorded(entry)
                again = _repeated(request, self.agent_id, recorded)
                return again or cancelled_error(request.run_id, recorded, "it is cancelled once")
        if any(entry.agent_id == self.agent_id for entry in audit):
            return RunNotCancellableError(
                f"run {request.run_id} has already finished; there is nothing to cancel",
                run_id=request.run_id,
            )
        return SnapshotNotFoundError(
            f"snapshot not found for run {request.run_id} of agent {self.agent_id!r}: unknown or already "
            "finished",
            run_id=request.run_id,
        )


async def check_cancel(
    store: Store, policies: ApproverPolicies | None, state: RunState, request: CancelRequest
) -> None:
    """Raise why ``request`` cannot cancel the run as it stands: the canceller may not
    (``CancelForbiddenError``; not checked for a cancel cascading from the parent's), it is cancelled
    (``RunCancelledError``) or finished (``RunNotCancellableError``) already, or the call the canceller
    saw no longer waits as it saw it (the ``DecisionConflictError`` naming who decided it first)."""
    if not request.cascade:
        check_canceller(policies, state, request.canceller)
    if state.cancel is not None:
        raise cancelled_error(state.run_id, state.cancel, "it is cancelled once")
    if state.status == "finished":
        raise RunNotCancellableError(
            f"run {state.run_id} has already finished; there is nothing to cancel", run_id=state.run_id
        )
    if request.tool_call_id is None:
        return
    as_seen = DecideRequest(
        run_id=state.run_id,
        decision=Decline(),
        tool_call_id=request.tool_call_id,
        fingerprint=request.fingerprint,
    )
    try:
        find_target(state, as_seen)
    except ToolCallNotSuspendedError as exc:
        audit = await store.list_audit(state.run_id)
        raise decided_in(audit, as_seen, state.agent_id) or exc from exc


def _repeated(request: CancelRequest, agent_id: str, cancel: Cancellation | None) -> CancelRecorded | None:
    """The same cancel again (a retry after its answer was lost: same canceller, same reason) is
    answered as the first was; any other cancel of a cancelled run is refused (``_check``)."""
    if cancel is None or cancel.reason != (request.reason or DEFAULT_REASON):
        return None
    mine = request.canceller.id if request.canceller is not None else None
    if mine != (cancel.by.id if cancel.by is not None else None):
        return None
    answer = CancelledRun.of(request.run_id, agent_id, cancel, "cancelled")
    return CancelRecorded(answer, cancel, taken=False)


__all__ = ["CancelRecorded", "Cancels", "check_cancel"]
