"""Cancelling a run, as state: what the cancel writes into the run, and how a cancelled run is told.

A cancel is a decision on the whole run (DESIGN §9). It is recorded in the run's state
(``RunState.cancel``) by one compare-and-set write before it is acknowledged
(``troupe.core.run.cancels``), the same write that withdraws every pause still open (each call
closed as cancelled, audited, and announced to notification targets as ``tool-call.withdrawn``). From
then on nothing resumes the run: a decision finds it cancelled, recovery ends it instead of going on,
and whichever host holds it stops what it was doing and ends it (``troupe.core.run.stopping``).

Everything here is pure state work on a ``RunState``.
"""

from __future__ import annotations

from typing import Any

from troupe.core.vocabulary.errors import RunCancelledError
from troupe.core.vocabulary.identity import LOCAL_ISSUER, SYSTEM_ISSUER, Identity, Principal
from troupe.core.vocabulary.pause_shapes import audit_entry
from troupe.core.vocabulary.state import CallStatus, Cancellation, Decision, RunState, ToolCallState
from troupe.core.vocabulary.store import AuditEntry

DEFAULT_REASON = "The run was cancelled"
# The finish reasons a run that was stopped ends with (a cancel, or its max_duration_s running out).
STOPPED = frozenset({"cancelled", "max-duration"})
# Who stops a run whose max_duration_s ran out, as the audit records it.
OUT_OF_TIME = Principal.system("max-duration")


def out_of_time(reason: str) -> Cancellation:
    """The cancel of a run whose ``max_duration_s`` ran out."""
    return Cancellation(reason=reason, by=OUT_OF_TIME.identity(), finish_reason="max-duration")


def as_recorded(entry: AuditEntry) -> Cancellation:
    """A cancel as the run's audit entry recorded it (the run itself is gone)."""
    who = None
    if entry.decided_by:
        subject = entry.subject or entry.decided_by
        who = Identity(issuer=entry.issuer or LOCAL_ISSUER, subject=subject, name=entry.decided_by)
    timed_out = who is not None and who.issuer == SYSTEM_ISSUER and who.subject == OUT_OF_TIME.subject
    return Cancellation(
        reason=entry.reason or DEFAULT_REASON,
        by=who,
        at=entry.decided_at,
        finish_reason="max-duration" if timed_out else "cancelled",
    )


def what_happened(run_id: str, cancellation: Cancellation) -> str:
    """One sentence saying the run was cancelled, by whom and why (for errors, models and people)."""
    if cancellation.finish_reason == "max-duration":
        return f"run {run_id} was stopped: {cancellation.reason}"
    who = f" by {cancellation.who}" if cancellation.who else ""
    return f"run {run_id} was cancelled{who}: {cancellation.reason}"


def cancelled_error(run_id: str, cancellation: Cancellation, doing: str = "") -> RunCancelledError:
    """The 409 a decision (or a second cancel) gets once the run is cancelled; it names the canceller."""
    tail = f"; {doing}" if doing else ""
    return RunCancelledError(
        f"{what_happened(run_id, cancellation)}{tail}",
        run_id=run_id,
        decision="cancelled",
        cancelled_by=cancellation.who,
        reason=cancellation.reason,
        cancelled_at=cancellation.at.isoformat(),
    )


def cancelled_output(run_id: str, cancellation: Cancellation) -> dict[str, Any]:
    """What a call the cancel cut short holds as its output (an error; no model is given it)."""
    return {"error": f"cancelled: {what_happened(run_id, cancellation)}"}


def record(state: RunState, cancellation: Cancellation, surface: str) -> tuple[AuditEntry, ...]:
    """Record the cancel in ``state`` (mutated): the run is cancelled and every open pause withdrawn,
    its call closed as cancelled. Returns the audit entries to write with it: one for the run, one per
    withdrawn pause (the writer announces those as ``tool-call.withdrawn``)."""
    who = cancellation.by
    people: dict[str, Any] = {
        "reason": cancellation.reason,
        "decided_by": cancellation.who,
        "subject": who.subject if who is not None else None,
        "issuer": who.issuer if who is not None else None,
        "surface": surface,
        "decided_at": cancellation.at,
    }
    entries = [
        AuditEntry(
            run_id=state.run_id,
            agent_id=state.agent_id,
            tool_call_id="",
            tool_name="",
            args={},
            fingerprint="",
            kind="cancelled",
            agent_path=[state.agent_id],
            resource_id=state.resource_id,
            **people,
        )
    ]
    entries += [
        audit_entry(state, call, pause, kind="cancelled", **people) for call, pause in state.open_pauses()
    ]
    decision = Decision(kind="cancelled", reason=cancellation.reason, decided_by=cancellation.who)
    decision.decider = who.model_copy(update={"surface": surface}) if who is not None else None
    decision.decided_at = cancellation.at
    for call in state.paused_calls():
        close(state.run_id, call, cancellation)
        call.decision = decision
    state.cancel = cancellation
    return tuple(entries)


def close(run_id: str, call: ToolCallState, cancellation: Cancellation) -> None:
    """Close a call the cancel cut short (paused, or in flight): done, with the cancel as its error."""
    call.status, call.is_error, call.pauses = CallStatus.DONE, True, []
    call.output = cancelled_output(run_id, cancellation)


def outcome(cancellation: Cancellation) -> dict[str, Any]:
    """How a stopped run ended, as a subagent's finished record keeps it and its finish chunk says it."""
    return {
        "finish_reason": cancellation.finish_reason,
        "cancelled": {
            "reason": cancellation.reason,
            "cancelled_by": cancellation.who,
            "cancelled_at": cancellation.at.isoformat(),
        },
    }


def child_message(run_id: str, finish: dict[str, Any]) -> str | None:
    """What a parent's model is told when its subagent's run ``run_id`` was stopped (read from the
    subagent's ``finish`` payload); None if it was not."""
    if finish.get("finish_reason") not in STOPPED:
        return None
    told = finish.get("cancelled") or {}
    reason = told.get("reason") or DEFAULT_REASON
    if finish.get("finish_reason") == "max-duration":
        return f"the subagent's run {run_id} was stopped: {reason}"
    who = f" by {told['cancelled_by']}" if told.get("cancelled_by") else ""
    return f"the subagent's run {run_id} was cancelled{who}: {reason}"


__all__ = [
    "DEFAULT_REASON",
    "OUT_OF_TIME",
    "STOPPED",
    "as_recorded",
    "cancelled_error",
    "cancelled_output",
    "child_message",
    "close",
    "out_of_time",
    "outcome",
    "record",
    "what_happened",
]
