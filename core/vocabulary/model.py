"""The model interface the agent loop talks to.

A model turn is streamed as ``TextDelta`` and ``ToolCallPart`` events and closed by one ``TurnEnd``.
Messages are OpenAI chat-format dicts and tools are OpenAI function specs, so any chat-completions
backend (and the scripted fakes in ``troupe.core.models.testing``) fits behind it.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """One tool call the model asked for. ``args`` is the decoded JSON object, or the raw text when the
    model produced something that is not a JSON object (the loop reports that back as a tool error)."""

    id: str
    name: str
    args: dict[str, Any] | str = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TurnEnd:
    finish_reason: str = "stop"
    usage: Usage = field(default_factory=Usage)


ModelEvent = TextDelta | ToolCallPart | TurnEnd


@dataclass(frozen=True, slots=True)
class ModelRequest:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    # JSON schema the answer must follow (structured output); None for a normal turn.
    response_schema: dict[str, Any] | None = None


class Model(abc.ABC):
    """A chat model: what an agent's ``model`` is. Subclass it to bring another model.

    Implementations must be picklable: agents are shipped to Ray actors. ``OpenAIModel`` and
    ``troupe.testing``'s ``ScriptedModel`` and ``FunctionModel`` are the ones Troupe brings.

    Attributes:
        id: The model's name, as errors and traces show it.
    """

    id: str = "model"

    @abc.abstractmethod
    def stream_turn(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream one assistant turn.

        Args:
            request: The conversation (OpenAI chat messages) and the tools' OpenAI specs.

        Returns:
            The turn's events: ``TextDelta`` and ``ToolCallPart`` parts, then a ``TurnEnd`` (finish
            reason and usage).
        """


__all__ = [
    "Model",
    "ModelEvent",
    "ModelRequest",
    "TextDelta",
    "ToolCallPart",
    "TurnEnd",
    "Usage",
]
