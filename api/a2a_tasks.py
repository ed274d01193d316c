"""A run as an A2A task: every ``Task`` Troupe's A2A server answers with is made here, from the run as
the store holds it (or as its last operation ended), never from a copy of its own.

- a paused run is ``input-required``: its status message has a text part for people and a data part
  listing every pending call (``troupe.actors.a2a.pending``), with the error of a refused answer;
- a run in flight is ``working``;
- a run that ended in the answer to this request is ``completed`` with its answer as an artifact, or
  ``failed`` with the error;
- a run that was cancelled (or stopped past its ``max_duration_s``) is ``canceled``, its status message
  saying who cancelled it, why and when, however long ago (the audit log keeps it);
- a run that ended earlier is ``completed`` with no artifact: Troupe keeps no finished run (its
  snapshot goes when it ends; its decisions stay in the audit log), so its answer went to whoever was
  connected when it ended.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from troupe.actors.a2a.pending import pending_data
from troupe.core.deciding.cancelling import DEFAULT_REASON
from troupe.core.vocabulary.args_preview import args_preview
from troupe.core.vocabulary.errors import DecisionInterruptedError, TroupeError
from troupe.core.vocabulary.hidden_chars import visible
from troupe.core.vocabulary.pause_shapes import suspended_run
from troupe.core.vocabulary.results import RunResult
from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.suspended import PendingToolCall

ANSWER_ARTIFACT = "answer"
# The kind of the data part a cancelled task's status message carries.
CANCELLED_KIND = "troupe.cancelled"


def context_of(state: RunState) -> str:
    """A run's A2A context: its thread (runs started over A2A always have one: the task's own id when
    the message named none), else its own id (a run started over another surface without one)."""
    return state.thread_id or state.run_id


def status_message(task_id: str, context_id: str, parts: list[Part]) -> Message:
    """The agent's message of a task's status."""
    return Message(
        message_id=str(uuid.uuid4()),
        task_id=task_id,
        context_id=context_id,
        role=Role.ROLE_AGENT,
        parts=parts,
    )


def task(task_id: str, context_id: str, state: Any, parts: list[Part] | None = None) -> Task:
    """A task in ``state``, with a status message of ``parts`` if given."""
    status = TaskStatus(state=state)
    if parts:
        status.message.CopyFrom(status_message(task_id, context_id, parts))
    status.timestamp.GetCurrentTime()
    return Task(id=task_id, context_id=context_id, status=status)


def paused_task(
    state: RunState,
    *,
    note: TroupeError | None = None,
    inbox: str | None = None,
    taken: list[str] | None = None,
) -> Task:
    """A paused run: ``input-required``, every pending call listed (``note``: why the last answer was
    refused; ``taken``: the tool calls its decisions before that decided, if any)."""
    pending = suspended_run(state).pending
    error: dict[str, Any] | None = None
    if note is not None:
        error = {"code": note.code, "message": note.message}
        if taken:
            error["taken"] = taken
    data = pending_data(state.run_id, pending, error=error, inbox=inbox)
    parts = [new_text_part(_summary(state.agent_id, pending, note, taken)), new_data_part(data)]
    return task(state.run_id, context_of(state), TaskState.TASK_STATE_INPUT_REQUIRED, parts)


def _summary(
    agent_id: str, pending: list[PendingToolCall], note: TroupeError | None, taken: list[str] | None
) -> str:
    lines = []
    if isinstance(note, DecisionInterruptedError):  # it went out, and may have taken effect below
        lines.append(f"Your answer may have taken effect before it failed ({note.code}): {note.message}")
    elif note is not None and taken:
        lines.append(
            f"Your decisions for {', '.join(taken)} were taken; the rest of your answer was not "
            f"({note.code}): {note.message}"
        )
    elif note is not None:
        lines.append(f"Your answer was not taken ({note.code}): {note.message}")
    lines.append(f"Agent {agent_id!r} waits for a decision on {len(pending)} tool call(s):")
    for call in pending:
        # For a person: every argument, long values cut in place (the data part has them whole).
        asks = "needs approval" if call.requires_approval else "asks " + args_preview(call.suspend_payload)
        lines.append(f"- {visible(call.tool_call_id)}: {call.tool_name} {args_preview(call.args)} {asks}")
    lines.append(
        'Answer on this task with a data part {"decisions": [{"toolCallId": ..., "approved": true}]} '
        '(approved: false with a "reason" to decline; "resumeData" to answer a question).'
    )
    return "\n".join(lines)


def working_task(task_id: str, context_id: str) -> Task:
    """A run in flight."""
    return task(task_id, context_id, TaskState.TASK_STATE_WORKING)


def finished_task(task_id: str, context_id: str, result: RunResult) -> Task:
    """A run that ended in this request: ``completed`` with its answer, or ``failed``."""
    if result.finish_reason == "error":
        return failed_task(task_id, context_id, _error_text(result))
    done = task(task_id, context_id, TaskState.TASK_STATE_COMPLETED)
    done.artifacts.append(answer_artifact(answer_text(result)))
    return done


def answer_text(result: RunResult) -> str:
    """A finished run's answer: the text of its last step (earlier steps' text led up to it)."""
    return result.steps[-1].text if result.steps else result.text


def answer_artifact(text: str) -> Artifact:
    """A finished run's answer as the task's artifact."""
    return Artifact(artifact_id=ANSWER_ARTIFACT, name="answer", parts=[new_text_part(text)])


def failed_task(task_id: str, context_id: str, why: str) -> Task:
    """A run that ended with an error (``why``: its code and message)."""
    return task(task_id, context_id, TaskState.TASK_STATE_FAILED, [new_text_part(why)])


def ended_task(task_id: str, context_id: str) -> Task:
    """A run that ended before this request: its answer is not kept here."""
    why = (
        "The run has finished. Troupe keeps no finished run: its answer went to the request that was "
        "connected when it ended, and its decisions are in the audit log."
    )
    return task(task_id, context_id, TaskState.TASK_STATE_COMPLETED, [new_text_part(why)])


def cancelled_task(
    task_id: str, context_id: str, cancelled: Mapping[str, Any] | None, stopped: bool = False
) -> Task:
    """A run that was cancelled: ``canceled``, its status message saying so in a text part and in a data
    part ``{"kind": "troupe.cancelled", "cancelledBy", "reason", "cancelledAt"}``.

    Args:
        task_id: the task (the run's id).
        context_id: its context.
        cancelled: who, why and when, as the run's finish or ``Runtime.run_info`` give them
            (``cancelled_by``, ``reason``, ``cancelled_at``); None if not known.
        stopped: the run was stopped past its ``max_duration_s`` rather than cancelled by someone.

    Returns:
        The task in state ``canceled``.
    """
    told = dict(cancelled or {})
    who, reason = told.get("cancelled_by"), told.get("reason") or DEFAULT_REASON
    at = told.get("cancelled_at")
    if stopped:
        text = f"The run was stopped: {reason}"
    else:
        text = f"The run was cancelled{f' by {who}' if who else ''}: {reason}"
    data = {"kind": CANCELLED_KIND, "cancelledBy": who, "reason": reason, "cancelledAt": _iso(at)}
    return task(
        task_id, context_id, TaskState.TASK_STATE_CANCELED, [new_text_part(text), new_data_part(data)]
    )


def _iso(at: Any) -> str | None:
    return at.isoformat() if hasattr(at, "isoformat") else (str(at) if at is not None else None)


def _error_text(result: RunResult) -> str:
    error = result.error
    if isinstance(error, dict):
        return f"{error.get('code', 'AGENT_RUN_FAILED')}: {error.get('message', '')}"
    return json.dumps(error, default=str) if error is not None else "the run failed"


__all__ = [
    "ANSWER_ARTIFACT",
    "CANCELLED_KIND",
    "answer_artifact",
    "answer_text",
    "cancelled_task",
    "context_of",
    "ended_task",
    "failed_task",
    "finished_task",
    "paused_task",
    "status_message",
    "task",
    "working_task",
]
