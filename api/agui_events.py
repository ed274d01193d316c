"""Troupe's chunks as AG-UI events, for one AG-UI run.

- a model turn is a step (``STEP_STARTED``/``STEP_FINISHED``, named ``step <n>``);
- text is ``TEXT_MESSAGE_START/CONTENT/END`` (message id ``<run id>:<text id>``);
- a tool call is ``TOOL_CALL_START/ARGS/END`` in the step's assistant message, and what came of it one
  ``TOOL_CALL_RESULT``: the result, the error, or the reason a decline gave the model (AG-UI has no
  event for an error or a decline: ``metadata["troupe"]`` says which it was);
- a subagent (a delegation call's ``tool-output``) is ``SUBAGENT_STARTED`` (``subagentRunId`` = its
  Troupe run id, ``parentToolCallId`` = the delegation call), its own events attributed to it, and
  ``SUBAGENT_FINISHED`` or ``SUBAGENT_ERROR``; a subagent still working when the run pauses finishes
  ``suspended``. Ids inside a subagent are prefixed with its run id (two agents' models may both name a
  call ``call-1``);
- a run that was cancelled: a call it cut short has its ``TOOL_CALL_RESULT`` with ``metadata["troupe"]``
  ``{"error": true, "cancelled": true}``; a subagent whose run was cancelled (by itself, or with its
  parent's) ends in ``SUBAGENT_ERROR`` with the code ``AGENT_RUN_CANCELLED`` (AG-UI's subagent outcomes
  are success and suspended only).

Pause chunks make no event here: the run's interrupts are read from the store when its stream ends
(``troupe.api.agui_interrupts``). Whatever is still open then (a message, a step, a subagent) is closed by
``close``, as AG-UI requires before a run's terminal event.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentFinishedSuccessOutcome,
    SubagentFinishedSuspendedOutcome,
    SubagentStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from troupe.core.deciding.cancelling import STOPPED, child_message
from troupe.core.deciding.decisions import DEFAULT_DECLINE_REASON
from troupe.core.vocabulary.chunks import PAUSE_TYPES, Chunk
from troupe.core.vocabulary.errors import RunCancelledError


@dataclass
class _Scope:
    """Whose chunks these are: the top run's (``subagent`` None) or a subagent run's."""

    run_id: str
    subagent: str | None = None
    message: str | None = None  # the assistant message of the step in progress
    step: int = 0

    def call_id(self, tool_call_id: str) -> str:
        """A tool call's AG-UI id: the top run's as it is, a subagent's prefixed with its run id."""
        return tool_call_id if self.subagent is None else f"{self.run_id}:{tool_call_id}"


@dataclass
class EventTranslator:
    """Turns one AG-UI run's chunks into events, remembering what it opened so it can close it."""

    scopes: dict[str, _Scope] = field(default_factory=dict)  # by Troupe run id
    texts: dict[str, str | None] = field(default_factory=dict)  # open message id -> its subagent
    steps: dict[tuple[str | None, str], None] = field(default_factory=dict)  # open (subagent, name)
    subagents: dict[str, str | None] = field(default_factory=dict)  # active run id -> parent subagent
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # every subagent run seen, in order
    usage: dict[str, int] = field(default_factory=dict)
    finished: dict[str, Any] | None = None  # the top run's finish payload
    error: dict[str, Any] | None = None  # the top run's error, as ``TroupeError.to_dict`` gives it
    paused: bool = False

    def events(self, chunk: Chunk) -> list[BaseEvent]:
        """The events of one chunk of the top run."""
        if chunk.type == "finish":
            self.finished = chunk.payload
            return []
        if chunk.type == "error":
            self.error = chunk.payload.get("error") or {"message": "the run failed"}
            return []
        scope = self.scopes.setdefault(chunk.run_id, _Scope(chunk.run_id))
        return self._translate(chunk.type, chunk.payload, scope)

    def _translate(self, kind: str, payload: dict[str, Any], scope: _Scope) -> list[BaseEvent]:
        if kind in PAUSE_TYPES:
            self.paused = True
            return []
        handler = self._handlers().get(kind)
        return handler(payload, scope) if handler is not None else []

    def _handlers(self) -> dict[str, Callable[[dict[str, Any], _Scope], list[BaseEvent]]]:
        return {
            "step-start": self._step_start,
            "step-finish": self._step_finish,
            "text-start": self._text_start,
            "text-delta": self._text_delta,
            "text-end": self._text_end,
            "tool-call": self._tool_call,
            "tool-result": self._tool_result,
            "tool-error": self._tool_result,
            "tool-output-denied": self._tool_result,
            "tool-output": self._subagent,
        }

    # ---- steps and text ---------------------------------------------------------------------------

    def _step_start(self, payload: dict[str, Any], scope: _Scope) -> list[BaseEvent]:
        scope.step, scope.message = int(payload.get("step") or 0), None
        name = f"step {scope.step}"
        self.steps[(scope.subagent, name)] = None
        return [StepStartedEvent(step_name=name, subagent_run_id=scope.subagent)]

    def _step_finish(self, payload: dict[str, Any], scope: _Scope) -> list[BaseEvent]:
        key = (scope.subagent, f"step {payload.get('step')}")
        if key not in self.steps:  # begun in an earlier AG-UI run, before the pause
            return []
        del self.steps[key]
        for name, count in (payload.get("usage") or {}).items():
            if isinstance(count, int):
                self.usage[name] = self.usage.get(name, 0) + count
        return [StepFinishedEvent(step_name=key[1], subagent_run_id=scope.subagent)]

    def _text_start(self, payload: dict[str, Any], scope: _Scope) -> list[BaseEvent]:
        message = f"{scope.run_id}:{payload.get('id')}"
        scope.message = message
        if message in self.texts:
            return []
        self.texts[message] = scope.subagent
        return [TextMessageStartEvent(message_id=message, role="assistant", subagent_run_id=scope.subagent)]

    def _text_delta(self, payload: dict[str, Any], scope: _Scope) -> list[BaseEvent]:
        delta = payload.get("text") or ""
        if not delta:
            return []
        opened = self._text_start(payload, scope)
        message = f"{scope.run_id}:{payload.get('id')}"
        return [
            *opened,
            TextMessageContentEvent(message_id=message, delta=delta, subagent_run_id=scope.subagent),
        ]

    def _text_end(self, payload: dict[str, Any], scope: _Scope) -> list[BaseEvent]:
        message = f"{scope.run_id}:{payload.get('id')}"
        if message not in self.texts:
            return []
        del self.texts[message]
        return [TextMessageEndEvent(message_id=message, subagent_run_id=scope.subagent)]

    # ---- tool calls ---------------------------------------------------------------------------------

    def _tool_call(self, payload: dict[str, Any], scope: _Scope) -> list[BaseEvent]:
        call = scope.call_id(str(payload.get("tool_call_id")))
        if scope.message is None:  # a step without text: its calls share one assistant message
            scope.message = f"{scope.run_id}:step-{scope.step}"
        sub = scope.subagent
        return [
            ToolCallStartEvent(
                tool_call_id=call,
                tool_call_name=str(payload.get("tool_name")),
                parent_message_id=scope.message,
                subagent_run_id=sub,
            ),
            ToolCallArgsEvent(tool_call_id=call, delta=_json(payload.get("args") or {}), subagent_run_id=sub),
            ToolCallEndEvent(tool_call_id=call, subagent_run_id=sub),
        ]

    def _tool_result(self, payload: dict[str, Any], scope: _Scope) -> list[BaseEvent]:
        call = scope.call_id(str(payload.get("tool_call_id")))
        approval = payload.get("approval")
        if isinstance(approval, dict):  # tool-output-denied: the model hears the reason
            content, how = approval.get("reason") or DEFAULT_DECLINE_REASON, {"declined": True}
        else:
            result = payload.get("result")
            content = result if isinstance(result, str) else _json(result)
            how = {"error": True} if isinstance(result, dict) and "error" in result else {}
            if payload.get("cancelled"):  # cut short by its run's cancel
                how = {"error": True, "cancelled": True}
        return [
            ToolCallResultEvent(
                message_id=f"{scope.run_id}:result:{payload.get('tool_call_id')}",
                tool_call_id=call,
                content=content,
                role="tool",
                subagent_run_id=scope.subagent,
                metadata={"troupe": how} if how else None,
            )
        ]

    # ---- subagents ----------------------------------------------------------------------------------

    def _subagent(self, payload: dict[str, Any], scope: _Scope) -> list[BaseEvent]:
        inner = payload.get("output")
        if not isinstance(inner, dict) or not inner.get("run_id"):
            return []
        child = str(inner["run_id"])
        out: list[BaseEvent] = []
        if child not in self.subagents:
            self.subagents[child] = scope.subagent
            self.runs[child] = {
                "runId": child,
                "agentId": payload.get("agent_id"),
                "parentRunId": scope.run_id,
                "toolCallId": payload.get("tool_call_id"),
                "status": "running",
            }
            out.append(
                SubagentStartedEvent(
                    subagent_run_id=child,
                    name=str(payload.get("agent_id") or payload.get("tool_name")),
                    parent_subagent_run_id=scope.subagent,
                    parent_tool_call_id=scope.call_id(str(payload.get("tool_call_id"))),
                )
            )
        kind, body = str(inner.get("type")), inner.get("payload") or {}
        if kind == "finish" and body.get("finish_reason") in STOPPED:
            said = child_message(child, body) or f"the subagent's run {child} was cancelled"
            return [*out, *self._end_subagent(child, _cancelled(said))]
        if kind == "finish":
            return [*out, *self._end_subagent(child, None)]
        if kind == "error":
            error = body.get("error") or {}
            return [*out, *self._end_subagent(child, error)]
        child_scope = self.scopes.setdefault(child, _Scope(child, child))
        return [*out, *self._translate(kind, body, child_scope)]

    def _end_subagent(self, child: str, error: dict[str, Any] | None) -> list[BaseEvent]:
        if child not in self.subagents:
            return []
        out = self._close_owned(child)
        del self.subagents[child]
        self.runs[child]["status"] = "finished" if error is None else error.get("status", "failed")
        if error is not None:
            message = str(error.get("message") or "the subagent failed")
            out.append(SubagentErrorEvent(subagent_run_id=child, message=message, code=error.get("code")))
        else:
            out.append(SubagentFinishedEvent(subagent_run_id=child, outcome=SubagentFinishedSuccessOutcome()))
        return out

    # ---- closing --------------------------------------------------------------------------------------

    def _close_owned(self, owner: str | None) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        for message, sub in list(self.texts.items()):
            if sub == owner:
                del self.texts[message]
                out.append(TextMessageEndEvent(message_id=message, subagent_run_id=sub))
        for sub, name in list(self.steps):
            if sub == owner:
                del self.steps[(sub, name)]
                out.append(StepFinishedEvent(step_name=name, subagent_run_id=sub))
        return out

    def close(
        self, interrupts_by_subagent: dict[str, list[str]] | None = None, cancelled: bool = False
    ) -> list[BaseEvent]:
        """End everything still open, innermost first: a subagent still active is suspended (when the
        run pauses, with the interrupt ids it raised), cancelled with the run (``cancelled``), or, when
        the run ended otherwise, finished."""
        out: list[BaseEvent] = []
        for child in reversed(list(self.subagents)):
            if cancelled:
                out.extend(self._end_subagent(child, _cancelled(f"the subagent's run {child} was cancelled")))
                continue
            out.extend(self._close_owned(child))
            if interrupts_by_subagent is None:
                outcome: Any = SubagentFinishedSuccessOutcome()
                self.runs[child]["status"] = "finished"
            else:
                outcome = SubagentFinishedSuspendedOutcome(interrupt_ids=interrupts_by_subagent.get(child))
                self.runs[child]["status"] = "suspended"
            out.append(SubagentFinishedEvent(subagent_run_id=child, outcome=outcome))
        self.subagents.clear()
        out.extend(self._close_owned(None))
        return out

    @property
    def tree(self) -> list[dict[str, Any]]:
        """The subagent runs this AG-UI run saw, each with its parent run, delegation call and status."""
        return list(self.runs.values())

    def token_usage(self) -> list[TokenUsage] | None:
        """The model calls of the steps this AG-UI run began and finished (a resumed run reports only
        its own), subagents' included."""
        if not self.usage:
            return None
        return [
            TokenUsage(
                input_tokens=self.usage.get("input_tokens"),
                output_tokens=self.usage.get("output_tokens"),
                total_tokens=self.usage.get("total_tokens"),
            )
        ]

    @property
    def stopped(self) -> bool:
        """Whether the top run's finish says it was cancelled (or stopped past its max_duration_s)."""
        return (self.finished or {}).get("finish_reason") in STOPPED

    def final_text(self) -> str | None:
        """The top run's answer, from its ``finish`` chunk (None before one)."""
        output = (self.finished or {}).get("output")
        text = output.get("text") if isinstance(output, dict) else None
        return text if isinstance(text, str) else None


def _cancelled(message: str) -> dict[str, Any]:
    """A subagent's end as an error: its run was cancelled."""
    return {"code": RunCancelledError.code, "message": message, "status": "cancelled"}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


__all__ = ["EventTranslator"]
