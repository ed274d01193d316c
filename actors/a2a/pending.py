"""The data Troupe's A2A agents put in an ``input-required`` status, and the data an answer carries.

Both sides of Troupe's A2A speak it: an agent served over A2A (``troupe.api.a2a_server``) lists its
paused calls in the status message's data part, and a remote Troupe agent standing as a subagent
(``troupe.actors.a2a.proxy``) reads that list and answers it. Plain JSON, camelCase, no SDK types:

    status message, data part:  {"kind": "troupe.pendingToolCalls", "runId": ..., "pendingToolCalls":
                                 [{"toolCallId", "kind": "approval"|"suspend", "toolName", "args",
                                   "agentPath", "fingerprint", "resumeSchema", "suspendPayload",
                                   "origin", "expiresAt", "approvals"}], "answerSchema": {...}}
    answer, data part:          {"decisions": [{"toolCallId", "fingerprint"?, "approved": true,
                                   "editedArgs"?} | {"toolCallId", "approved": false, "reason"?}
                                 | {"toolCallId", "resumeData": ...}]}

An answer names each call it decides by its tool call id (and, to be sure it decides what was shown,
its fingerprint); several calls may be decided in one answer or one at a time, in any order.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from troupe.core.vocabulary.storable import MAX_ID_CHARS, value_problem
from troupe.core.vocabulary.suspended import PendingToolCall

PENDING_KIND = "troupe.pendingToolCalls"
# What a decision's text may hold (a decline's reason), as over HTTP.
MAX_REASON_CHARS = 100_000
# An answer carries at most this many decisions (a run pauses on a handful of calls at a time).
MAX_DECISIONS = 100
# The most a pending call's args, payload or schema may hold when it comes from a remote agent.
MAX_PENDING_CHARS = 1_000_000


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class DecisionItem(_Shape):
    """One decision of an answer: approve (``approved: true``, optionally ``editedArgs``), decline
    (``approved: false``, optionally ``reason``), or answer a ``suspend()`` pause (``resumeData``)."""

    tool_call_id: StrictStr = Field(min_length=1, max_length=MAX_ID_CHARS)
    fingerprint: StrictStr | None = Field(default=None, max_length=MAX_ID_CHARS)
    approved: StrictBool | None = None
    reason: StrictStr | None = Field(default=None, max_length=MAX_REASON_CHARS)
    edited_args: dict[str, Any] | None = None
    resume_data: Any = None

    @model_validator(mode="after")
    def _one_kind(self) -> DecisionItem:
        answers = "resume_data" in self.model_fields_set
        if answers == (self.approved is not None):
            raise ValueError("give either approved (true or false) or resumeData, not both and not neither")
        if self.reason is not None and self.approved is not False:
            raise ValueError("a reason comes only with approved: false")
        if self.edited_args is not None and self.approved is not True:
            raise ValueError("editedArgs come only with approved: true")
        problem = value_problem(self.resume_data, MAX_PENDING_CHARS) if answers else None
        if problem is not None:
            raise ValueError(f"resumeData cannot be kept: {problem}")
        return self


class Answer(_Shape):
    """An answer's data part: the decisions it makes, in the order they are applied."""

    decisions: list[DecisionItem] = Field(min_length=1, max_length=MAX_DECISIONS)


ANSWER_SCHEMA: dict[str, Any] = Answer.model_json_schema(by_alias=True)


class AnswerError(ValueError):
    """An answer that cannot be read; the message says what is wrong with it."""


def read_answer(data: Any) -> Answer:
    """The answer a data part carries, or ``AnswerError`` saying what is wrong with it."""
    try:
        return Answer.model_validate(data)
    except ValidationError as exc:
        raise AnswerError(f"the answer's data part is not a valid answer: {_problems(exc)}") from None


def _problems(exc: ValidationError) -> str:
    """The first few things wrong, as ``where: what``."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'data'}: {e['msg']}" for e in exc.errors()[:5])


def answer_data(decisions: list[DecisionItem]) -> dict[str, Any]:
    """The data part of an answer making ``decisions``."""
    return Answer(decisions=decisions).model_dump(mode="json", by_alias=True, exclude_unset=True)


class InDoubtView(_Shape):
    """A call in doubt after a takeover (``troupe.core.run.in_doubt``): its first host may still be running
    it, so it is neither run again nor declined before ``deadline``."""

    owner: StrictStr | None = Field(default=None, max_length=MAX_ID_CHARS)
    last_seen: datetime | None = None
    deadline: datetime


class PendingView(_Shape):
    """A paused call as the data part lists it."""

    tool_call_id: StrictStr = Field(min_length=1, max_length=MAX_ID_CHARS)
    kind: StrictStr = Field(pattern="^(approval|suspend)$")
    tool_name: StrictStr = Field(min_length=1, max_length=MAX_ID_CHARS)
    args: dict[str, Any] = Field(default_factory=dict)
    agent_path: list[StrictStr] = Field(default_factory=list, max_length=64)
    fingerprint: StrictStr = Field(min_length=1, max_length=MAX_ID_CHARS)
    resume_schema: dict[str, Any] | None = None
    suspend_payload: Any = None
    origin: dict[str, Any] | None = None
    expires_at: datetime | None = None
    approvals: list[StrictStr] = Field(default_factory=list, max_length=1000)
    # Set only when true (so a reader from before them can still read every other call): the call was
    # interrupted by a crash and is asked about again, and may still be running (``inDoubt``).
    interrupted: StrictBool | None = None
    in_doubt: InDoubtView | None = None

    @model_validator(mode="after")
    def _bounded(self) -> PendingView:
        held = [self.args, self.resume_schema, self.suspend_payload, self.origin]
        problem = value_problem(held, MAX_PENDING_CHARS)
        if problem is not None:
            raise ValueError(f"the pending call cannot be kept: {problem}")
        return self


class Pending(_Shape):
    """The data part of an ``input-required`` status."""

    kind: StrictStr = Field(pattern=f"^{PENDING_KIND}$")
    run_id: StrictStr = Field(max_length=MAX_ID_CHARS)
    pending_tool_calls: list[PendingView] = Field(max_length=MAX_DECISIONS)
    answer_schema: dict[str, Any] | None = None
    # Set when the last answer was refused: what was wrong with it (the calls still wait).
    error: dict[str, Any] | None = None
    inbox: StrictStr | None = None


def is_pending(data: Any) -> bool:
    """Whether a data part says it lists Troupe's pending calls (read it with ``read_pending``)."""
    return isinstance(data, dict) and data.get("kind") == PENDING_KIND


def read_pending(data: Any) -> Pending:
    """The pending calls a data part lists; ``AnswerError`` if it cannot be read."""
    try:
        return Pending.model_validate(data)
    except ValidationError as exc:
        raise AnswerError(f"the list of pending calls cannot be read: {_problems(exc)}") from None


def whole_numbers(value: Any) -> Any:
    """``value`` with every whole float made an int again. A2A carries data as protobuf ``Value``s,
    whose numbers are all doubles: an answer's ``{"count": 3}`` arrives as ``3.0``, which a strict
    schema (an ``int`` field) refuses. Read data is put back to the JSON it was (nesting is bounded by
    protobuf's own parse depth)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers(item) for item in value]
    return value


def pending_view(call: PendingToolCall) -> PendingView:
    """A listed paused call (``troupe.core.vocabulary.suspended``) as the data part shows it."""
    return PendingView(
        tool_call_id=call.tool_call_id,
        kind=call.kind,
        tool_name=call.tool_name,
        args=call.args,
        agent_path=call.agent_path,
        fingerprint=call.fingerprint,
        resume_schema=call.resume_schema,
        suspend_payload=call.suspend_payload,
        origin=call.tool_origin,
        expires_at=call.expires_at,
        approvals=call.approvals,
        interrupted=call.interrupted or None,
        in_doubt=InDoubtView.model_validate(call.in_doubt) if call.in_doubt is not None else None,
    )


def pending_data(
    run_id: str,
    calls: list[PendingToolCall],
    *,
    error: dict[str, Any] | None = None,
    inbox: str | None = None,
) -> dict[str, Any]:
    """The data part listing a paused run's calls (``error``: why the last answer was refused)."""
    data = Pending(
        kind=PENDING_KIND,
        run_id=run_id,
        pending_tool_calls=[pending_view(c) for c in calls],
        answer_schema=ANSWER_SCHEMA,
        error=error,
        inbox=inbox,
    )
    return data.model_dump(mode="json", by_alias=True, exclude_none=True)


__all__ = [
    "ANSWER_SCHEMA",
    "PENDING_KIND",
    "Answer",
    "AnswerError",
    "DecisionItem",
    "InDoubtView",
    "Pending",
    "PendingView",
    "answer_data",
    "is_pending",
    "pending_data",
    "pending_view",
    "read_answer",
    "read_pending",
    "whole_numbers",
]
