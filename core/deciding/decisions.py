"""Ruling on a decision: find the paused call it is for, check it, and apply it to the run state.

``rule`` is the whole of it, top to bottom: the target call and pause, the kind of decision the pause
takes, its deadline, the approver policy (``troupe.core.deciding.approvers``), then the decision itself.
Everything here is pure state work; ``troupe.core.run.claim`` wraps it in a compare-and-set so a
decision is claimed atomically and used once. Any check that fails raises before the state changes, so a
refused decision leaves the call paused and still decidable.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, assert_never

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError
from troupe.core.deciding.approvers import (
    ApproverPolicies,
    agreeing,
    approved_args,
    check_canceller,
    check_decider,
    needs_more,
)
from troupe.core.deciding.cancelling import DEFAULT_REASON as DEFAULT_CANCEL_REASON
from troupe.core.deciding.cancelling import cancelled_error
from troupe.core.deciding.decider_input import edit_over, refuse_unstorable, unknown_keys
from troupe.core.vocabulary.errors import (
    DecisionConflictError,
    DecisionRejectedError,
    PauseExpiredError,
    ResumeDataValidationError,
    RunCancelledError,
    RunInFlightError,
    ToolCallInDoubtError,
    ToolCallNotSuspendedError,
)
from troupe.core.vocabulary.identity import Approval
from troupe.core.vocabulary.json_schemas import instance_errors
from troupe.core.vocabulary.pause_shapes import audit_entry
from troupe.core.vocabulary.requests import Approve, Cancel, DecideRequest, DecisionInput, Decline, Resume
from troupe.core.vocabulary.state import CallStatus, Decision, Pause, RunState, ToolCallState
from troupe.core.vocabulary.store import AuditEntry
from troupe.core.vocabulary.tools import Tool

DEFAULT_DECLINE_REASON = "Tool call was not approved by the user"

# The resume schema of an approval pause, as Mastra publishes it: resume data {approved, reason?} decides it.
APPROVAL_RESUME_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "approved": {
            "type": "boolean",
            "description": "Controls if the tool call is approved or not, should be true when approved and "
            "false when declined",
        },
        "reason": {
            "description": "Optional explanation for the decision, surfaced to the model when the tool call "
            "is declined",
            "type": "string",
        },
    },
    "required": ["approved"],
    "additionalProperties": False,
}


class ApprovalAnswer(BaseModel):
    """Resume data for an approval pause (``APPROVAL_RESUME_SCHEMA``); strict, so "yes" is no approval."""

    model_config = ConfigDict(extra="forbid")
    approved: StrictBool
    reason: StrictStr | None = None


@dataclass
class Target:
    call: ToolCallState
    pause: Pause


@dataclass
class Counted:
    """An approval that counts towards its quorum: recorded on the pause (``entry`` audits it); the call
    keeps waiting."""

    target: Target
    entry: AuditEntry


@dataclass
class Applied:
    """The decision is applied: the call is claimed (to run, declined, or resumed) and ``entry`` audits
    it. A delegated call's decision is checked below, by the subagent; ``before`` is the call as it was,
    to put back if the subagent refuses it."""

    target: Target
    entry: AuditEntry
    delegated: bool
    before: ToolCallState | None = None


Ruling = Counted | Applied


def rule(
    state: RunState,
    request: DecideRequest,
    *,
    tools: Mapping[str, Tool],
    delegations: Collection[str],
    policies: ApproverPolicies | None,
    now: datetime,
    expiring: bool = False,
) -> Ruling:
    """Rule on ``request`` against ``state`` (mutated when the ruling records something), or raise why
    it cannot be decided. ``expiring``: the decline of a pause whose deadline passed (no policy, no
    deadline check)."""
    if state.cancel is not None:
        raise cancelled_error(state.run_id, state.cancel, "nothing in it can be decided any more")
    if state.parent is not None and not request.routed:
        raise _decided_below(state)
    target = find_target(state, request)
    check_kind(state.run_id, target, request)
    decision = as_decision(target.pause, target.call.tool_call_id, request.decision)
    call = target.call
    delegated = call.tool_name in delegations and call.child is not None
    if isinstance(decision, Cancel):
        return _route_cancel(state, target, request, policies, delegated)
    refuse_in_flight(state, call)
    refuse_in_doubt(state.run_id, call, target.pause, now)
    policy = None
    if not expiring and state.parent is None:  # a subagent's pause is decided, and checked, at the top
        refuse_late(state, target, now)
        policy = policies.for_pause(target.pause) if policies is not None else None
    tool = None if delegated else tools.get(call.tool_name)
    if policy is not None:
        check_decider(policy, state, target.pause, decision, request)
        if isinstance(decision, Approve) and decision.edited_args is not None:
            checked_edit(tool, call, decision.edited_args)  # an edit is refused before it is counted
        if needs_more(policy, target.pause, decision):
            return _count(state, target, request, decision, policy.quorum)
    before = call.model_copy(deep=True) if delegated else None
    entry = apply(state, target, decision, request, tool)
    if expiring:
        assert call.decision is not None
        call.decision.kind = entry.kind = "expired"
    if policy is not None and policy.quorum > 1 and isinstance(decision, Approve):
        agreed = agreeing(target.pause, approved_args(target.pause, decision.edited_args))
        entry.approvals = [*(a.display for a in agreed), entry.decided_by or ""]
        entry.quorum = policy.quorum
    return Applied(target, entry, delegated, before)


def _decided_below(state: RunState) -> DecisionRejectedError:
    """A decision sent straight to a subagent's run: its pauses are decided at the top, where the
    approver policies that govern them are checked, and from where the decision is handed down. Taken
    here it would skip those checks and leave the runs above waiting on a pause that is gone."""
    parent = state.parent
    assert parent is not None
    path = " > ".join([*parent.agent_path, state.agent_id])  # its agent_path ends with the parent
    return DecisionRejectedError(
        f"run {state.run_id} of agent {state.agent_id!r} is a subagent's run ({path}), delegated by run "
        f"{parent.run_id} of agent {parent.agent_id!r}: its calls are decided on the top-level run above "
        "it, where they wait as that run's pauses",
        run_id=state.run_id,
    )


def _route_cancel(
    state: RunState,
    target: Target,
    request: DecideRequest,
    policies: ApproverPolicies | None,
    delegated: bool,
) -> Applied:
    """A cancel of a run below, on its way down the delegation that leads to it: checked at the top
    (who may cancel), then claimed here like any decision, withdrawing the call's pauses."""
    if not delegated:
        raise DecisionRejectedError(
            f"tool call {target.call.tool_call_id!r} of run {state.run_id} does not lead to a subagent's "
            "run: a cancel is routed only down a delegation",
            tool_call_id=target.call.tool_call_id,
        )
    if state.parent is None:
        check_canceller(policies, state, request.decider)
    before = target.call.model_copy(deep=True)
    return Applied(target, apply(state, target, request.decision, request, None), True, before)


def _count(
    state: RunState, target: Target, request: DecideRequest, decision: DecisionInput, quorum: int
) -> Counted:
    pause = target.pause
    assert isinstance(decision, Approve) and request.decider is not None
    mine = request.decider.identity(request.surface)
    pause.approvals.append(Approval(**mine.model_dump(), edited_args=decision.edited_args))
    agreed = agreeing(pause, approved_args(pause, decision.edited_args))
    entry = audit_entry(
        state,
        target.call,
        pause,
        kind="approval-recorded",
        edited_args=decision.edited_args,
        approvals=[a.display for a in agreed],
        quorum=quorum,
        **_who(request),
    )
    return Counted(target, entry)


def _who(request: DecideRequest) -> dict[str, Any]:
    """The audit's record of who decided, through which surface."""
    who = request.decider
    return {
        "decided_by": request.decided_by,
        "subject": who.subject if who is not None else None,
        "issuer": who.issuer if who is not None else None,
        "surface": request.surface,
    }


def refuse_late(state: RunState, target: Target, now: datetime) -> None:
    """A human's decision after the pause's deadline is refused (only the top level enforces it)."""
    expires_at = target.pause.expires_at
    if expires_at is not None and expires_at <= now:
        raise PauseExpiredError(
            f"tool call {target.call.tool_call_id!r} of run {state.run_id} expired at "
            f"{expires_at.isoformat()}; it is declined for lack of a decision",
            run_id=state.run_id,
            tool_call_id=target.call.tool_call_id,
        )


def refuse_in_flight(state: RunState, call: ToolCallState) -> None:
    """A decision on a run whose step is still in flight is refused (nothing is claimed). Its pauses
    are announced once the step has ended, but a host of another process can read a call waiting
    before then (with the run still running): claimed now, it would close the step without the
    results of the calls still running there. Within a process the run's lock keeps a decision waiting
    until the step has ended; across processes the decider retries."""
    if state.status == "suspended":
        return
    raise RunInFlightError(
        f"run {state.run_id}'s step is still in flight on host {state.owner}: its tool call "
        f"{call.tool_call_id!r} ({call.tool_name!r}) waits for a decision, but nothing is decided while "
        "the step's other calls run; decide once the run has paused (when they end, or once recovery "
        "has taken the run over if that host is gone)",
        run_id=state.run_id,
        tool_call_id=call.tool_call_id,
        owner=state.owner,
    )


def refuse_in_doubt(run_id: str, call: ToolCallState, pause: Pause, now: datetime) -> None:
    """A decision on a call in doubt before its deadline is refused (nothing is claimed)."""
    doubt = pause.in_doubt
    if doubt is None or doubt.deadline <= now:
        return
    raise ToolCallInDoubtError(
        f"tool call {call.tool_call_id!r} ({pause.tool_name!r}) of run {run_id} is in doubt: the host that "
        f"was running it ({doubt.owner}) lost the run and may still be running it, so it is neither run "
        f"again nor declined before {doubt.deadline.isoformat()}; if that host's result comes first, the "
        "run goes on with it by itself",
        run_id=run_id,
        tool_call_id=call.tool_call_id,
        owner=doubt.owner,
        deadline=doubt.deadline.isoformat(),
    )


def find_target(state: RunState, request: DecideRequest) -> Target:
    """The paused call (and which of its pauses) a decision is for."""
    if request.tool_call_id is None:
        call = state.latest_paused()
        if call is None:
            raise ToolCallNotSuspendedError(
                f"run {state.run_id} has no tool call waiting for a decision", run_id=state.run_id
            )
    else:
        found = state.call(request.tool_call_id)
        if found is None:
            raise ToolCallNotSuspendedError(
                f"tool call {request.tool_call_id!r} is not paused in run {state.run_id}",
                run_id=state.run_id,
                tool_call_id=request.tool_call_id,
            )
        call = found
    if call.status not in (CallStatus.AWAITING_APPROVAL, CallStatus.SUSPENDED):
        if call.decision is not None:
            decision = call.decision
            raise already_decided(
                state.run_id, call.tool_call_id, decision.kind, decision.decided_by, decision.reason
            )
        raise ToolCallNotSuspendedError(
            f"tool call {call.tool_call_id!r} of run {state.run_id} is {call.status.value}, not paused",
            run_id=state.run_id,
            tool_call_id=call.tool_call_id,
        )
    return Target(call, _pick_pause(state.run_id, call, request.fingerprint))


def already_decided(
    run_id: str, tool_call_id: str, kind: str, by: str | None, reason: str | None = None
) -> DecisionConflictError:
    who = f" by {by}" if by else ""
    if kind == "cancelled":
        return RunCancelledError(
            f"run {run_id} was cancelled{who}: {reason}; its tool call {tool_call_id!r} waits for no "
            "decision any more",
            run_id=run_id,
            tool_call_id=tool_call_id,
            decision=kind,
            cancelled_by=by,
            reason=reason,
        )
    # A decision after the expiry sweep got there is as late as one that finds the deadline passed.
    error = PauseExpiredError if kind == "expired" else DecisionConflictError
    return error(
        f"tool call {tool_call_id!r} of run {run_id} was already {kind}{who}; a call is decided once",
        run_id=run_id,
        tool_call_id=tool_call_id,
        decision=kind,
    )


def _pick_pause(run_id: str, call: ToolCallState, fingerprint: str | None) -> Pause:
    if fingerprint is None:
        pause = call.latest_pause
        assert pause is not None, "a paused call always carries a pause"
        return pause
    for pause in call.pauses:
        if pause.fingerprint == fingerprint:
            return pause
    raise DecisionConflictError(
        f"tool call {call.tool_call_id!r} of run {run_id} no longer matches fingerprint {fingerprint}: "
        "what it asks has changed since it was shown",
        run_id=run_id,
        tool_call_id=call.tool_call_id,
    )


# What each kind of decision needs the pause to be, and what to say when it is not. Resume data fits
# both: an approval pause is answered with {approved, reason?} (see ``as_decision``).
_FITS: dict[type, tuple[str, str]] = {
    Approve: (
        "approval",
        "waits for an answer (resume data), not an approval: answer it with resume_stream or "
        "resume_generate, POST .../resume-stream, or `troupe resume RUN CALL --data JSON`",
    ),
}


def check_kind(run_id: str, target: Target, request: DecideRequest) -> None:
    """Approve only what waits for approval; resume or decline either."""
    fit = _FITS.get(type(request.decision))
    if fit is not None and target.pause.kind != fit[0]:
        raise ToolCallNotSuspendedError(
            f"tool call {target.call.tool_call_id!r} of run {run_id} {fit[1]}",
            run_id=run_id,
            tool_call_id=target.call.tool_call_id,
        )


def merged_args(tool: Tool, call: ToolCallState, edited: dict[str, Any]) -> dict[str, Any]:
    """The model's args with a human's edits over them, validated against the tool's input schema."""
    if not tool.allow_edited_args:
        raise DecisionRejectedError(
            f"tool {call.tool_name!r} does not accept edited args (allow_edited_args=False); "
            "approve as is or decline",
            tool_call_id=call.tool_call_id,
        )
    if not isinstance(edited, dict):
        raise DecisionRejectedError("edited_args must be an object", tool_call_id=call.tool_call_id)
    refuse_unstorable("edited args", call, edited, DecisionRejectedError)
    # A key the schema does not read would be dropped by it, and the tool would run with the model's
    # value while the audit records the edit as made.
    unknown = unknown_keys(tool.input_schema, edited)
    if unknown:
        raise DecisionRejectedError(
            f"edited args for tool {call.tool_name!r} name {', '.join(map(repr, unknown))}, which its "
            f"input schema does not have (it has {', '.join(map(repr, tool.input_schema.model_fields))})",
            tool_call_id=call.tool_call_id,
        )
    merged = edit_over(tool.input_schema, call.args, edited)
    try:
        tool.parse_input(merged)
    except ValidationError as exc:
        raise DecisionRejectedError(
            f"edited args for tool {call.tool_name!r} are invalid: {_errors(exc)}",
            tool_call_id=call.tool_call_id,
        ) from exc
    return merged


def checked_edit(tool: Tool | None, call: ToolCallState, edited: Any) -> dict[str, Any] | None:
    """``merged_args``; for a delegated call (``tool`` None: its tool is the subagent's, which checks
    the edit once the decision reaches it) only whether the edit can be stored here first."""
    if tool is not None:
        return merged_args(tool, call, edited)
    refuse_unstorable("edited args", call, edited, DecisionRejectedError)
    return None


def validated_resume_data(tool: Tool | None, target: Target, data: Any) -> Any:
    """Resume data checked against the tool's schema as JSON, strictly (``true`` is not 1, ``"5"`` is
    not 5) unless the schema's own config sets ``strict=False``; for a tool without one, against the
    JSON schema its ``suspend()`` gave for this pause, if any. Whatever the schema, it must be storable;
    that is all this level checks of a delegated call's (``tool`` None: the subagent checks the rest)."""
    call = target.call
    refuse_unstorable("resume data", call, data, ResumeDataValidationError)
    schema = tool.resume_schema if tool is not None else None
    if tool is None or (schema is None and target.pause.resume_schema is None):
        return data
    if schema is None:
        return _fits_pause_schema(target, data)
    encoded = json.dumps(data, allow_nan=False)  # it is JSON: refuse_unstorable says so
    strict = schema.model_config.get("strict") is not False
    try:
        return schema.model_validate_json(encoded, strict=strict).model_dump(mode="json")
    except ValidationError as exc:
        raise ResumeDataValidationError(
            f"resume data for tool {call.tool_name!r} does not match its resume_schema: {_errors(exc)}",
            tool_call_id=call.tool_call_id,
        ) from exc


def _fits_pause_schema(target: Target, data: Any) -> Any:
    assert target.pause.resume_schema is not None
    errors = instance_errors(target.pause.resume_schema, data)
    if errors:
        raise ResumeDataValidationError(
            f"resume data for tool {target.call.tool_name!r} does not match the schema it asked for: "
            + "; ".join(errors),
            tool_call_id=target.call.tool_call_id,
        )
    return data


def parse_resume_data(tool: Tool, data: Any) -> Any:
    """What ``ctx.agent.resume_data`` holds: the resume_schema model, or the raw data without one."""
    schema: type[BaseModel] | None = tool.resume_schema
    return schema.model_validate(data) if schema is not None and data is not None else data


def as_decision(pause: Pause, tool_call_id: str, decision: DecisionInput) -> DecisionInput:
    """Resume data for an approval pause is an approval or a decline, decided exactly as those are;
    data that does not fit ``APPROVAL_RESUME_SCHEMA`` raises (nothing changes, the call stays paused)."""
    if not isinstance(decision, Resume) or pause.kind != "approval":
        return decision
    try:
        answer = ApprovalAnswer.model_validate(decision.resume_data)
    except ValidationError as exc:
        raise ResumeDataValidationError(
            f"resume data for the approval of tool {pause.tool_name!r} must be "
            f"{{approved: boolean, reason?: string}}: {_errors(exc)}",
            tool_call_id=tool_call_id,
        ) from exc
    if decision.approved is not None and decision.approved != answer.approved:
        # send_tool_approval(approved=True, resume_data={"approved": False}): neither half can be trusted.
        raise ResumeDataValidationError(
            f"the resume data says approved: {str(answer.approved).lower()} for the approval of tool "
            f"{pause.tool_name!r}, but the request says approved: {str(decision.approved).lower()}; "
            "send one answer",
            tool_call_id=tool_call_id,
        )
    return Approve() if answer.approved else Decline(answer.reason)


def apply(
    state: RunState, target: Target, decision: DecisionInput, request: DecideRequest, tool: Tool | None
) -> AuditEntry:
    """Claim the call for this decision (mutates ``state``) and return the audit entry recording it.

    ``tool`` is None for a delegated call: its tool lives in the subagent, which checks the decision.
    """
    call, pause = target.call, target.pause
    record = Decision(
        kind="approved",
        decided_by=request.decided_by,
        decider=request.decider.identity(request.surface) if request.decider is not None else None,
        inner_tool_call_id=pause.inner_tool_call_id,
        inner_fingerprint=pause.inner_fingerprint,
    )
    _settle(target, record, decision, tool)
    if call.status is CallStatus.RUNNING:
        call.started_at = record.decided_at  # claimed to run (a deadline counts from here)
    call.decision = record
    call.pauses = []
    return audit_entry(
        state,
        call,
        pause,
        kind=record.kind,
        reason=record.reason,
        edited_args=record.edited_args,
        resume_data=record.resume_data,
        decided_at=record.decided_at,
        **_who(request),
    )


def _settle(target: Target, record: Decision, decision: DecisionInput, tool: Tool | None) -> None:
    """What the decision makes of the call: running (approved, resumed, a delegated decline the
    subagent reports, or a decline its tool hears), or done as declined."""
    call = target.call
    match decision:
        case Approve(edited_args=edited):
            if edited is not None:
                call.exec_args = checked_edit(tool, call, edited)
            record.edited_args = edited
            call.status = CallStatus.RUNNING
        case Decline(reason=reason):
            record.kind = "declined"
            record.reason = reason or DEFAULT_DECLINE_REASON
            if tool is None or (tool.resume_on_decline and target.pause.kind == "suspend"):
                call.status = CallStatus.RUNNING
            else:
                call.status = CallStatus.DONE
                call.declined = True
                call.output = record.reason
        case Resume(resume_data=data):
            record.kind = "resumed"
            record.resume_data = validated_resume_data(tool, target, data)
            call.status = CallStatus.RUNNING
        case Cancel(run_id=below, reason=reason):  # routed down to the run it cancels (_route_cancel)
            record.kind = "cancelled"
            record.reason = reason or DEFAULT_CANCEL_REASON
            record.cancel_target = below
            call.status = CallStatus.RUNNING
        case _:
            assert_never(decision)


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())


__all__ = [
    "APPROVAL_RESUME_SCHEMA",
    "DEFAULT_DECLINE_REASON",
    "Applied",
    "ApprovalAnswer",
    "Counted",
    "Ruling",
    "Target",
    "already_decided",
    "parse_resume_data",
    "rule",
]
