"""A remote task's question as paused calls here, and a decision as the message that answers it.

A remote Troupe agent lists its paused calls in a data part (``troupe.actors.a2a.pending``): each
becomes a paused call of the proxy run with the remote call's id, tool, args, resume schema and path
(under this agent's id), its origin the remote agent; the answer names the remote call and its
fingerprint in ``{"decisions": [...]}``. Any other agent's ``input-required`` is one question: a
``suspend()``-like pause whose payload is what the agent said, answered with the person's data (text
as a text part, anything else as a data part), or with their reason for declining to answer.
"""

from __future__ import annotations

import uuid
from typing import Any

from troupe.actors.a2a.errors import RemoteAgentError
from troupe.actors.a2a.pending import (
    AnswerError,
    DecisionItem,
    PendingView,
    answer_data,
    is_pending,
    read_pending,
)
from troupe.actors.a2a.remote_task import Question
from troupe.core.deciding.decisions import DEFAULT_DECLINE_REASON, Target
from troupe.core.run.pauses import next_seq
from troupe.core.vocabulary.json_schemas import schema_problem
from troupe.core.vocabulary.requests import Approve, DecisionInput, Decline, Resume
from troupe.core.vocabulary.state import CallStatus, InDoubt, Pause, RunState, ToolCallState, fingerprint

_PROMPT_NS = uuid.UUID("5b2f0d4e-8f1a-4c7e-b3a9-2e6d1c0f9a71")


def origin_of(state: RunState, remote: Any, inner: dict[str, Any] | None = None) -> dict[str, Any]:
    """Where a pause of the proxy run comes from: the remote agent (and where it got the tool)."""
    task_id = state.remote.task_id if state.remote is not None else None
    origin: dict[str, Any] = {"a2a": {"agent": state.agent_id, "url": remote.spec.where, "task_id": task_id}}
    if inner:
        origin["remote"] = inner
    return origin


def calls_of(state: RunState, question: Question, remote: Any) -> list[ToolCallState]:
    """The paused calls ``question`` makes of the proxy run (``RemoteAgentError`` if it cannot be read)."""
    listed = [data for data in question.data if is_pending(data)]
    if not listed:
        return [_asked(state, question, remote)]
    try:
        pending = read_pending(listed[0]).pending_tool_calls
    except AnswerError as exc:
        raise RemoteAgentError(f"{remote.name} {exc}") from None
    if not pending:
        raise RemoteAgentError(f"{remote.name} asks for input but lists no pending call")
    return [_remote_call(state, view, remote) for view in pending]


def _remote_call(state: RunState, view: PendingView, remote: Any) -> ToolCallState:
    schema = view.resume_schema
    problem = schema_problem(schema, object_only=False) if schema is not None else None
    if problem is not None:
        raise RemoteAgentError(f"{remote.name} asks with a resume schema that cannot be used: {problem}")
    approval = view.kind == "approval"
    doubt = _in_doubt(view, remote)
    pause = Pause(
        kind="approval" if approval else "suspend",
        tool_name=view.tool_name,
        args=view.args,
        suspend_payload=view.suspend_payload,
        resume_schema=schema,
        agent_path=[state.agent_id, *view.agent_path],
        fingerprint=fingerprint(view.tool_call_id, view.tool_name, view.args, view.fingerprint),
        inner_tool_call_id=view.tool_call_id,
        inner_fingerprint=view.fingerprint,
        seq=next_seq(state),
        expires_at=view.expires_at,
        tool_origin=origin_of(state, remote, view.origin),
        interrupted=bool(view.interrupted),
        in_doubt=doubt,
    )
    return ToolCallState(
        tool_call_id=view.tool_call_id,
        tool_name=view.tool_name,
        args=view.args,
        requires_approval=approval,
        status=CallStatus.AWAITING_APPROVAL if approval else CallStatus.SUSPENDED,
        pauses=[pause],
        in_doubt=doubt,
    )


def _in_doubt(view: PendingView, remote: Any) -> InDoubt | None:
    """A remote call in doubt, as the pauses above show it: the people deciding at the top see that it
    may have taken effect, and their decision is refused before its deadline without being sent (the
    remote would refuse it too). The owner is named with the remote agent: it is a host of theirs."""
    doubt = view.in_doubt
    if doubt is None:
        return None
    owner = f"{doubt.owner} at {remote.name}" if doubt.owner else remote.name
    return InDoubt(owner=owner, last_seen=doubt.last_seen, deadline=doubt.deadline)


def prompt_of(state: RunState) -> str:
    """What the proxy run asked the remote agent (its one user message)."""
    return next((str(m.get("content") or "") for m in state.messages if m.get("role") == "user"), "")


def _asked(state: RunState, question: Question, remote: Any) -> ToolCallState:
    """Another agent's question: one pause, answered with data (or declined)."""
    args = {"prompt": prompt_of(state)}
    payload: dict[str, Any] = {"message": question.text}
    if question.data:
        payload["data"] = list(question.data)
    pause = Pause(
        kind="suspend",
        tool_name=state.agent_id,
        args=args,
        suspend_payload=payload,
        agent_path=[state.agent_id],
        fingerprint=fingerprint(question.id, state.agent_id, args, question.id),
        seq=next_seq(state),
        tool_origin=origin_of(state, remote),
    )
    return ToolCallState(
        tool_call_id=question.id,
        tool_name=state.agent_id,
        args=args,
        status=CallStatus.SUSPENDED,
        pauses=[pause],
    )


def answer_message(
    state: RunState, target: Target | None, decision: DecisionInput | None, *, prompt: str | None = None
) -> Any:
    """The A2A message to send: the prompt that starts the task, or the answer ``decision`` makes to
    the pause ``target``."""
    from a2a.helpers.proto_helpers import new_data_part, new_text_part
    from a2a.types.a2a_pb2 import Message, Role

    if prompt is not None:
        # Named after the run, so a remote agent that keeps message ids can tell a repeat.
        message_id = str(uuid.uuid5(_PROMPT_NS, state.run_id))
        return Message(message_id=message_id, role=Role.ROLE_USER, parts=[new_text_part(prompt)])
    assert target is not None and decision is not None and state.remote is not None
    pause = target.pause
    if pause.inner_tool_call_id is not None:
        item = _decision_item(pause.inner_tool_call_id, pause.inner_fingerprint, decision)
        parts = [new_data_part(answer_data([item]))]
    elif isinstance(decision, Resume):
        data = decision.resume_data
        parts = [new_text_part(data) if isinstance(data, str) else new_data_part(data)]
    else:
        reason = decision.reason if isinstance(decision, Decline) else None
        parts = [new_text_part(f"Declined: {reason or DEFAULT_DECLINE_REASON}")]
    return Message(
        message_id=str(uuid.uuid4()),
        task_id=state.remote.task_id or "",
        context_id=state.remote.context_id or "",
        role=Role.ROLE_USER,
        parts=parts,
    )


def _decision_item(tool_call_id: str, remote_fp: str | None, decision: DecisionInput) -> DecisionItem:
    fields: dict[str, Any] = {"tool_call_id": tool_call_id, "fingerprint": remote_fp}
    if isinstance(decision, Approve):
        fields.update(approved=True, edited_args=decision.edited_args)
    elif isinstance(decision, Decline):
        fields.update(approved=False, reason=decision.reason)
    elif isinstance(decision, Resume):
        fields.update(resume_data=decision.resume_data)
    else:  # a cancel is never an answer: the proxy run records it and cancels the remote task
        raise TypeError(f"{type(decision).__name__} is not an answer to a remote task")
    return DecisionItem(**{k: v for k, v in fields.items() if v is not None or k == "resume_data"})


def refusal_of(event: Any) -> tuple[str, str] | None:
    """What a remote Troupe agent said was wrong with an answer (its error's code and message), if its
    first event says it did not carry it through (an ``input-required`` task whose list of pending calls
    carries an error)."""
    from google.protobuf.json_format import MessageToDict

    if event.WhichOneof("payload") != "task":
        return None
    task = MessageToDict(event.task)
    status = task.get("status") or {}
    if status.get("state") != "TASK_STATE_INPUT_REQUIRED":
        return None
    for part in (status.get("message") or {}).get("parts") or []:
        data = part.get("data") if isinstance(part, dict) else None
        if isinstance(data, dict) and is_pending(data) and isinstance(data.get("error"), dict):
            error = data["error"]
            return str(error.get("code") or "REFUSED"), str(error.get("message") or "")
    return None


__all__ = ["answer_message", "calls_of", "origin_of", "prompt_of", "refusal_of"]
