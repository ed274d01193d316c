"""Deciding a paused call: find the target, check the decision, and apply it to the run state.

Everything here is pure state work; the engine wraps it in a compare-and-set so a decision is claimed
atomically and used once. Any check that fails raises before the state changes, so a refused decision
leaves the call paused and still decidable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, assert_never

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError
from troupe.core.vocabulary.errors import (
    DecisionConflictError,
    DecisionRejectedError,
    PauseExpiredError,
    ResumeDataValidationError,
    ToolCallNotSuspendedError,
)
from troupe.core.vocabulary.requests import Approve, DecideRequest, DecisionInput, Decline, Resume
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
            raise already_decided(
                state.run_id, call.tool_call_id, call.decision.kind, call.decision.decided_by
            )
        raise ToolCallNotSuspendedError(
            f"tool call {call.tool_call_id!r} of run {state.run_id} is {call.status.value}, not paused",
            run_id=state.run_id,
            tool_call_id=call.tool_call_id,
        )
    return Target(call, _pick_pause(state.run_id, call, request.fingerprint))


def already_decided(run_id: str, tool_call_id: str, kind: str, by: str | None) -> DecisionConflictError:
    who = f" by {by}" if by else ""
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
    Approve: ("approval", "waits for resume data, not approval: use resume_stream/resume_generate"),
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
    merged = {**call.args, **edited}
    try:
        tool.parse_input(merged)
    except ValidationError as exc:
        raise DecisionRejectedError(
            f"edited args for tool {call.tool_name!r} are invalid: {_errors(exc)}",
            tool_call_id=call.tool_call_id,
        ) from exc
    return merged


def validated_resume_data(tool: Tool, call: ToolCallState, data: Any) -> Any:
    """Resume data checked against the tool's schema as JSON, strictly (``true`` is not 1, ``"5"`` is
    not 5) unless the schema's own config sets ``strict=False``."""
    schema = tool.resume_schema
    if schema is None:
        return data
    strict = schema.model_config.get("strict") is not False
    try:
        encoded = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ResumeDataValidationError(
            f"resume data for tool {call.tool_name!r} is not JSON: {exc}", tool_call_id=call.tool_call_id
        ) from exc
    try:
        return schema.model_validate_json(encoded, strict=strict).model_dump(mode="json")
    except ValidationError as exc:
        raise ResumeDataValidationError(
            f"resume data for tool {call.tool_name!r} does not match its resume_schema: {_errors(exc)}",
            tool_call_id=call.tool_call_id,
        ) from exc


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
    return Approve() if answer.approved else Decline(answer.reason)


def apply(state: RunState, target: Target, request: DecideRequest, tool: Tool | None) -> AuditEntry:
    """Claim the call for this decision (mutates ``state``) and return the audit entry recording it.

    ``tool`` is None for a delegated call: its tool lives in the subagent, which checks the decision.
    """
    call, pause = target.call, target.pause
    decision = as_decision(pause, call.tool_call_id, request.decision)
    record = Decision(
        kind="approved",
        decided_by=request.decided_by,
        inner_tool_call_id=pause.inner_tool_call_id,
        inner_fingerprint=pause.inner_fingerprint,
    )
    match decision:
        case Approve(edited_args=edited):
            if edited is not None and tool is not None:
                call.exec_args = merged_args(tool, call, edited)
            record.edited_args = edited
            call.status = CallStatus.RUNNING
        case Decline(reason=reason):
            record.kind = "declined"
            record.reason = reason or DEFAULT_DECLINE_REASON
            if tool is None:
                call.status = CallStatus.RUNNING
            else:
                call.status = CallStatus.DONE
                call.declined = True
                call.output = record.reason
        case Resume(resume_data=data):
            record.kind = "resumed"
            record.resume_data = validated_resume_data(tool, call, data) if tool is not None else data
            call.status = CallStatus.RUNNING
        case _:
            assert_never(decision)
    call.decision = record
    call.pauses = []
    return audit_entry(
        state,
        Target(call, pause),
        kind=record.kind,
        reason=record.reason,
        edited_args=record.edited_args,
        resume_data=record.resume_data,
        decided_by=record.decided_by,
        decided_at=record.decided_at,
    )


def audit_entry(state: RunState, target: Target, **decision: Any) -> AuditEntry:
    """The audit record of a decision (``decision``: kind, who, when, ...) on ``target``'s pause."""
    pause = target.pause
    return AuditEntry(
        run_id=state.run_id,
        agent_id=state.agent_id,
        tool_call_id=target.call.tool_call_id,
        tool_name=pause.tool_name,
        args=pause.args,
        fingerprint=pause.fingerprint,
        agent_path=pause.agent_path,
        resource_id=state.resource_id,
        **decision,
    )


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors())


__all__ = [
    "APPROVAL_RESUME_SCHEMA",
    "DEFAULT_DECLINE_REASON",
    "ApprovalAnswer",
    "Target",
    "already_decided",
    "apply",
    "as_decision",
    "audit_entry",
    "check_kind",
    "find_target",
    "parse_resume_data",
]
