"""The durable hand-off of a delegated decision.

A decision on a delegation call is claimed at the parent first, in one atomic write that records the
subagent's call and pause it targets (``Decision.inner_*``), and only then routed down. If the route
fails (the subagent's actor died, its node was removed), the parent's record already holds everything
the subagent needs: when the subagent's run is next loaded by a host that follows it, that host finds
the decision here and applies it, as if it had been routed, so nobody has to decide twice.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import assert_never

from troupe.core.vocabulary.errors import AgentUnavailableError, DecisionPendingError
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.requests import Approve, Cancel, DecideRequest, DecisionInput, Decline, Resume
from troupe.core.vocabulary.state import PAUSED, CallStatus, Decision, RunState
from troupe.core.vocabulary.store import Store


def decision_input(decision: Decision) -> DecisionInput:
    """The decision as it was asked for, to hand it on one level down."""
    match decision.kind:
        case "approved":
            return Approve(decision.edited_args)
        case "declined" | "expired":
            return Decline(decision.reason)
        case "resumed":
            return Resume(decision.resume_data)
        case "cancelled":
            return Cancel(decision.cancel_target or "", decision.reason)
        case _:
            assert_never(decision.kind)


async def handed_off(store: Store, state: RunState) -> DecideRequest | None:
    """The decision this subagent run's parent claimed for one of its open pauses but did not deliver,
    as a request to apply here; None if there is none (not a subagent run, nothing decided above, or
    the decision targets a pause this run no longer has)."""
    link = state.parent
    if link is None or state.status != "suspended":
        return None
    parent = await store.load_run(link.run_id)
    call = None if parent is None else parent.state.call(link.tool_call_id)
    if call is None or call.status is not CallStatus.RUNNING or call.decision is None:
        return None
    decision = call.decision
    mine = state.call(decision.inner_tool_call_id or "")
    if mine is None or mine.status not in PAUSED:
        return None
    # Only a pause that was already open when the decision was made: a later pause of the same call
    # (a tool that suspends again with the same args) has the same fingerprint but was never decided.
    if not any(
        p.fingerprint == decision.inner_fingerprint and p.paused_at <= decision.decided_at
        for p in mine.pauses
    ):
        return None
    return DecideRequest(
        run_id=state.run_id,
        decision=decision_input(decision),
        tool_call_id=mine.tool_call_id,
        fingerprint=decision.inner_fingerprint,
        decider=_decider(decision),
        surface=decision.decider.surface if decision.decider is not None else "python",
        routed=True,
    )


def _decider(decision: Decision) -> Principal | None:
    """Who made a decision recorded above, to audit it here too."""
    who = decision.decider
    if who is not None:
        return Principal(who.subject, who.issuer, who.name)
    return Principal.named(decision.decided_by) if decision.decided_by else None


def pending_delivery(state: RunState, delegations: Collection[str], error: BaseException) -> BaseException:
    """What a run's failure means for the caller. A subagent out of reach while a decided delegation
    call waits on it does not end the run: the decision is durable here, the run stays in flight at its
    last checkpoint, and the runtime's reconciler has its host take it up again until the subagent is
    back. The caller hears ``DecisionPendingError``; any other failure is returned as it is."""
    if not isinstance(error, AgentUnavailableError):
        return error
    waiting = [
        c.tool_call_id
        for c in state.calls
        if c.status is CallStatus.RUNNING and c.decision is not None and c.tool_name in delegations
    ]
    if not waiting:
        return error
    return DecisionPendingError(
        f"the decision on {', '.join(waiting)} of run {state.run_id} is recorded but its agent cannot be "
        "reached yet; it is delivered once, when the agent is back (follow the run with observe_stream)",
        run_id=state.run_id,
        tool_call_ids=waiting,
    )


__all__ = ["decision_input", "handed_off", "pending_delivery"]
