"""One model turn: ask the agent's model, stream its text and tool calls out as chunks, and record the
turn in the run's conversation.

What the model says is hostile input: text, tool call ids, names and arguments that cannot be stored
end the turn with a ``ModelError`` or reach the loop as refused arguments
(``troupe.core.vocabulary.storable``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from troupe.core.run.agent import AgentSpec
from troupe.core.run.flow import ActiveRun
from troupe.core.tracing import span
from troupe.core.vocabulary.errors import ModelError, TroupeError
from troupe.core.vocabulary.messages import assistant_message
from troupe.core.vocabulary.model import ModelRequest, TextDelta, ToolCallPart, TurnEnd
from troupe.core.vocabulary.storable import (
    MAX_ID_CHARS,
    MAX_TEXT_CHARS,
    RefusedArgs,
    args_problem,
    id_problem,
    text_problem,
)


@dataclass
class Turn:
    text: str
    calls: list[ToolCallPart]
    finish_reason: str


async def model_turn(spec: AgentSpec, tool_specs: list[dict[str, Any]], run: ActiveRun) -> Turn:
    """The run's next model turn (a new step): streamed out, then appended to its conversation."""
    state = run.state
    run.chunk("step-start", step=state.step + 1)
    system = [{"role": "system", "content": spec.instructions}] if spec.instructions else []
    request = ModelRequest(messages=system + state.messages, tools=tool_specs)
    text: list[str] = []
    calls: list[ToolCallPart] = []
    try:
        with span("troupe.model", troupe__model=spec.model.id, troupe__step=state.step + 1):
            end = await _stream_turn(spec, run, request, text, calls, _call_ids(state.messages))
    except TroupeError:
        raise
    except Exception as exc:
        raise ModelError(f"model {spec.model.id!r} failed: {type(exc).__name__}: {exc}") from exc
    if len({c.id for c in calls}) != len(calls):
        raise ModelError("the model gave two tool calls the same id in one turn")
    state.step += 1
    state.input_tokens += end.usage.input_tokens
    state.output_tokens += end.usage.output_tokens
    state.messages.append(assistant_message("".join(text), calls))
    return Turn("".join(text), calls, "tool-calls" if calls else end.finish_reason)


async def _stream_turn(
    spec: AgentSpec,
    run: ActiveRun,
    request: ModelRequest,
    text: list[str],
    calls: list[ToolCallPart],
    earlier: set[str],
) -> TurnEnd:
    """Stream the model's turn out as chunks, collecting its text and tool calls (``earlier``: the call
    ids the conversation already holds)."""
    end = TurnEnd()
    # Each stretch of text is one part, wrapped in text-start/text-end as Mastra does.
    part: str | None = None
    parts = 0
    # A running count: summing the earlier pieces at every delta is quadratic in the number of deltas
    # (a model streaming one character at a time held the host's event loop for seconds).
    said = 0
    async for event in spec.model.stream_turn(request):
        if isinstance(event, TextDelta):
            _refuse_unless_storable("text", text_problem(event.text, MAX_TEXT_CHARS - said))
            said += len(event.text)
            if part is None:
                parts += 1
                part = f"text-{run.state.step + 1}-{parts}"
                run.chunk("text-start", id=part)
            text.append(event.text)
            run.chunk("text-delta", id=part, text=event.text)
            continue
        if part is not None:
            run.chunk("text-end", type="text-end", id=part)
            part = None
        if isinstance(event, ToolCallPart):
            event = _new_id(_storable_call(event), earlier, run.state.step + 1)
            calls.append(event)
            run.chunk("tool-call", tool_call_id=event.id, tool_name=event.name, args=event.args)
        elif isinstance(event, TurnEnd):
            end = event
    if part is not None:
        run.chunk("text-end", type="text-end", id=part)
    return end


def _refuse_unless_storable(what: str, problem: str | None) -> None:
    if problem is not None:
        raise ModelError(f"the model's {what} cannot be stored: {problem}")


def _call_ids(messages: list[dict[str, Any]]) -> set[str]:
    return {
        call["id"]
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or ()
    }


def _new_id(part: ToolCallPart, earlier: set[str], step: int) -> ToolCallPart:
    """The call under an id the conversation has not used yet. Many OpenAI-compatible servers number
    calls per turn (``call_0`` at every step); a call id names its pause, its decisions, its audit
    entries and its subagent's run (``child_run_id``), so a reused one would land on the earlier call's
    (a second delegation hit the first one's finished run). The new id is stored with the turn, so
    recovery and decisions see the same one; the model reads it back in the conversation."""
    if part.id not in earlier:
        return part
    base = f"{part.id[: MAX_ID_CHARS - 32]}-step{step}"
    new, n = base, 1
    while new in earlier:
        n += 1
        new = f"{base}-{n}"
    return replace(part, id=new)


def _storable_call(part: ToolCallPart) -> ToolCallPart:
    """The call as it may be streamed and stored: arguments that cannot be are replaced by the reason."""
    _refuse_unless_storable("tool call id", id_problem(part.id))
    _refuse_unless_storable("tool name", id_problem(part.name))
    problem = args_problem(part.args)
    if problem is None:
        return part
    return ToolCallPart(part.id, part.name, RefusedArgs(f"they cannot be stored: {problem}"))


__all__ = ["Turn", "model_turn"]
