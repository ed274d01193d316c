"""Deterministic models for tests, demos and benchmarks.

    ScriptedModel([tool_call("delete_record", {"id": "abc-123"}, id="call-1"), text("Deleted.")])
    FunctionModel(lambda messages, tools: text("hi"))

A turn is one part or a list of parts (text and tool calls may be mixed; several tool calls are
parallel calls of one step).
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from troupe.core.vocabulary.model import (
    Model,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallPart,
    TurnEnd,
    Usage,
)

Part = TextDelta | ToolCallPart
Turn = Part | Sequence[Part]

_ids = itertools.count(1)
_WORDS = re.compile(r"\S+\s*|\s+")


def text(content: str) -> TextDelta:
    """A text part of a scripted turn.

    Args:
        content: What the model says.

    Example:
        >>> model = ScriptedModel([text("Hello!")])
    """
    return TextDelta(content)


def tool_call(name: str, args: dict[str, Any] | None = None, *, id: str | None = None) -> ToolCallPart:
    """A tool-call part of a scripted turn.

    Args:
        name: The tool's name, as the agent gives it to the model.
        args: The call's arguments (default none).
        id: The call's ``tool_call_id`` (default: a fresh ``call-<n>``); the decision methods take it.

    Example:
        >>> model = ScriptedModel([tool_call("delete_record", {"id": "abc-123"}, id="call-1"),
        ...                        text("Deleted.")])
    """
    return ToolCallPart(id=id or f"call-{next(_ids)}", name=name, args=dict(args or {}))


def _parts(turn: Turn) -> list[Part]:
    if isinstance(turn, TextDelta | ToolCallPart):
        return [turn]
    parts = list(turn)
    for part in parts:
        if not isinstance(part, TextDelta | ToolCallPart):
            raise TypeError(f"a scripted turn holds text(...) and tool_call(...) parts, got {part!r}")
    return parts


async def _emit(turn: Turn) -> AsyncIterator[ModelEvent]:
    parts = _parts(turn)
    output_chars = 0
    for part in parts:
        if isinstance(part, TextDelta):
            # Word-sized deltas, so streaming consumers see more than one piece.
            for piece in _WORDS.findall(part.text):
                output_chars += len(piece)
                yield TextDelta(piece)
        else:
            yield part
    has_calls = any(isinstance(p, ToolCallPart) for p in parts)
    yield TurnEnd("tool-calls" if has_calls else "stop", Usage(0, output_chars))


class ScriptedModelExhaustedError(AssertionError):
    """A ``ScriptedModel`` was called more times than it has turns: the run asked for a turn the test
    did not script."""


class ScriptedModel(Model):
    """A model that plays back a fixed list of turns, one per model call, shared by every run of the agent.

    Calling it past the end raises ``ScriptedModelExhaustedError``. Under Ray the model lives in the
    agent's actor process, so its place in the script is that process's, not the test's.

    Args:
        turns: The turns in order; each is one part (``text(...)``, ``tool_call(...)``) or a list of
            parts (several tool calls in one turn are parallel calls).

    Raises:
        TypeError: A turn holds something other than ``text`` and ``tool_call`` parts.

    Example:
        >>> model = ScriptedModel([
        ...     tool_call("delete_record", {"id": "abc-123"}, id="call-1"),   # turn 1: ask to delete
        ...     text("Deleted."),                                             # turn 2: after the tool
        ... ])
        >>> agent = Agent("records", model=model, tools=[delete_record])
    """

    id = "scripted"

    def __init__(self, turns: Sequence[Turn]) -> None:
        self.turns: list[Turn] = list(turns)
        for turn in self.turns:
            _parts(turn)
        self.cursor = 0
        self.requests: list[ModelRequest] = []

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Play the next scripted turn (text word by word, then its tool calls).

        Args:
            request: The conversation and tools (recorded in ``requests``; the script ignores them).

        Raises:
            ScriptedModelExhaustedError: Every turn has been played.
        """
        if self.cursor >= len(self.turns):
            raise ScriptedModelExhaustedError(
                f"ScriptedModel called {self.cursor + 1} times but scripted for {len(self.turns)} turns"
            )
        turn = self.turns[self.cursor]
        self.cursor += 1
        self.requests.append(request)
        async for event in _emit(turn):
            yield event

    def assert_complete(self) -> None:
        """Fail (``AssertionError``) if some turns were never played."""
        left = len(self.turns) - self.cursor
        if left:
            raise AssertionError(f"ScriptedModel has {left} unused turn(s) of {len(self.turns)}")


TurnFunction = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Turn | Awaitable[Turn]]


class FunctionModel(Model):
    """A model whose every turn is chosen by a function of the conversation.

    Because the turn is a function of the conversation, a FunctionModel is restart-safe: a run resumed in a
    fresh process gets the same answers.

    Args:
        fn: ``fn(messages, tools)`` (sync or async) returns the turn (a part or a list of parts):
            ``messages`` are OpenAI chat messages, ``tools`` the OpenAI tool specs.

    Example:
        >>> def answer(messages, tools):
        ...     done = last_tool_message(messages)
        ...     return text(f"Done: {done['content']}") if done else tool_call("lookup", {"q": "x"})
        >>> model = FunctionModel(answer)
    """

    id = "function"

    def __init__(self, fn: TurnFunction) -> None:
        self.fn = fn

    async def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Play the turn ``fn`` chooses for this conversation.

        Args:
            request: The conversation and the tools, handed to ``fn``.
        """
        turn = self.fn(request.messages, request.tools)
        if inspect.isawaitable(turn):
            turn = await turn
        async for event in _emit(turn):
            yield event


class CallLog:
    """A record of tool executions that every process can append to and read: a JSON-lines file.

    Tools run inside agent actors (other processes) under Ray, so a counter in the test's memory would
    see nothing; ``CallLog(path).record(...)`` from the tool and ``entries()`` in the test do.

    Args:
        path: The file (made on the first record).

    Example:
        >>> calls = CallLog(tmp_path / "calls.jsonl")
        >>> calls.record("delete_record", id="abc-123")   # in the tool
        >>> calls.count("delete_record")                   # in the test
        1
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def record(self, name: str, **data: Any) -> None:
        """Append one entry (one line, written at once, so processes never interleave).

        Args:
            name: What ran (a tool's name, say).
            **data: Anything JSON-able to keep with it.
        """
        line = json.dumps({"name": name, **data}) + "\n"
        # One write() of a short line in append mode is atomic between processes.
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)

    def entries(self, name: str | None = None) -> list[dict[str, Any]]:
        """The entries so far, oldest first.

        Args:
            name: Only entries with this name (default: all).

        Returns:
            Each entry as a dict: ``name`` and the data recorded with it.
        """
        try:
            with open(self.path, encoding="utf-8") as handle:
                rows = [json.loads(line) for line in handle if line.strip()]
        except FileNotFoundError:
            return []
        return [r for r in rows if name is None or r["name"] == name]

    def count(self, name: str | None = None) -> int:
        """How many entries there are.

        Args:
            name: Only entries with this name (default: all).
        """
        return len(self.entries(name))


def last_tool_message(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest tool-result message, for FunctionModels that answer what a tool returned.

    Args:
        messages: The conversation, as a FunctionModel's function gets it.

    Returns:
        The message (``{"role": "tool", "tool_call_id", "content"}``), or None if no tool has answered.
    """
    for message in reversed(messages):
        if message.get("role") == "tool":
            return message
    return None


__all__ = [
    "CallLog",
    "FunctionModel",
    "ScriptedModel",
    "ScriptedModelExhaustedError",
    "last_tool_message",
    "text",
    "tool_call",
]
