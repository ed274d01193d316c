"""Stream chunks: what a run tells the world, in order.

A chunk is ``Chunk(type, run_id, payload)``. Payload keys are snake_case in Python; ``to_wire`` gives the
camelCase frame the HTTP front door sends (``{"type", "runId", "from", "payload"}``). Types and payloads
follow Mastra's stream (docs/concepts/mastra.md lists the deliberate differences): text comes as
``text-start``/``text-delta``/``text-end``, a declined call as ``tool-output-denied``, and a paused stream
ends at its pause chunks (no ``finish``). Troupe's own information rides in extra payload fields.

A pause chunk also carries its ``PauseEvent``, the typed value its payload is written from: a supervisor
reads a subagent's pause from that (dates as datetimes), never back out of the payload dict.
"""

from __future__ import annotations

import json
import operator
import re
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Literal, TypeVar

ChunkType = Literal[
    "start",
    "step-start",
    "text-start",
    "text-delta",
    "text-end",
    "tool-call",
    "tool-call-approval",
    "tool-call-suspended",
    "tool-result",
    "tool-output-denied",
    "tool-error",
    "tool-output",
    "step-finish",
    "finish",
    "error",
]

# Chunk types that mean "a human must act"; they are emitted only after the pause is durable.
PAUSE_TYPES: frozenset[str] = frozenset({"tool-call-approval", "tool-call-suspended"})

_Dataclass = TypeVar("_Dataclass", bound=type)


def _pickled_by_constructor(cls: _Dataclass) -> _Dataclass:
    """Pickle the (frozen, slots) dataclass ``cls`` as a call of its constructor with every field in
    order. Chunks cross between processes in every batch, and the dataclass default goes through
    Python-level getstate/setstate, several times slower each way."""
    values = operator.attrgetter(*(f.name for f in fields(cls)))  # two or more fields: it gives a tuple

    def constructor_call(self: object) -> tuple[Any, ...]:
        return (cls, values(self))

    cls.__reduce__ = constructor_call  # type: ignore[method-assign, assignment]
    return cls


@_pickled_by_constructor
@dataclass(frozen=True, slots=True)
class PauseEvent:
    """A pause as an agent announces it: what a human is asked, about which of the run's calls."""

    run_id: str
    tool_call_id: str
    kind: Literal["approval", "suspend"]
    tool_name: str
    args: dict[str, Any]
    resume_schema: dict[str, Any] | None
    # From the announcing agent down to the agent whose tool asks.
    agent_path: tuple[str, ...]
    fingerprint: str
    suspend_payload: Any = None
    interrupted: bool = False
    expires_at: datetime | None = None
    tool_origin: dict[str, Any] | None = None
    # A call in doubt after a takeover: {"owner", "last_seen", "deadline"} (see RunState's InDoubt).
    in_doubt: dict[str, Any] | None = None

    def payload(self) -> dict[str, Any]:
        """The pause chunk's payload (Python's snake_case form; ``to_wire`` camelizes it)."""
        out: dict[str, Any] = {
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "args": self.args,
            "resume_schema": self.resume_schema,
            "agent_path": list(self.agent_path),
            "fingerprint": self.fingerprint,
        }
        if self.interrupted:
            out["interrupted"] = True
        if self.expires_at is not None:
            out["expires_at"] = self.expires_at.isoformat()
        if self.kind == "suspend":
            out["suspend_payload"] = self.suspend_payload
        if self.tool_origin is not None:
            out["tool_origin"] = self.tool_origin
        if self.in_doubt is not None:
            out["in_doubt"] = self.in_doubt
        return out


@_pickled_by_constructor
@dataclass(frozen=True, slots=True)
class Chunk:
    """One thing a run tells: text, a tool call, a pause, a result, the end. Streams carry them in order.

    The types and payloads follow Mastra's stream (docs/concepts/mastra.md): ``start``, ``step-start``,
    ``text-delta``, ``tool-call``, ``tool-call-approval`` and ``tool-call-suspended`` (a pause: its
    payload has ``tool_call_id``, ``tool_name``, ``args``, ``fingerprint``, ``agent_path`` and, for a
    ``suspend()``, ``suspend_payload`` and ``resume_schema``), ``tool-result``, ``tool-error``,
    ``tool-output-denied``, ``step-finish``, ``finish`` and ``error``.

    Attributes:
        type: The chunk's type.
        run_id: The run it belongs to.
        payload: What it says, with snake_case keys (camelCase on the wire).
        pause: On a pause chunk, the typed pause its payload was written from.

    Example:
        >>> async for chunk in stream.full_stream:
        ...     if chunk.type == "tool-call-approval":
        ...         print(chunk.payload["tool_call_id"], chunk.payload["args"])
    """

    type: ChunkType
    run_id: str
    payload: dict[str, Any] = field(default_factory=dict)
    # Set on a pause chunk (``PAUSE_TYPES``): the typed pause its payload was written from.
    pause: PauseEvent | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of_pause(cls, event: PauseEvent) -> Chunk:
        """The chunk that announces a pause.

        Args:
            event: The pause.
        """
        kind: ChunkType = "tool-call-suspended" if event.kind == "suspend" else "tool-call-approval"
        return cls(kind, event.run_id, event.payload(), event)

    def to_wire(self) -> dict[str, Any]:
        """The chunk as the HTTP front door sends it: ``{"type", "runId", "from", "payload"}``, camelCase."""
        payload = wire_payload(self.payload)
        return {"type": self.type, "runId": self.run_id, "from": "AGENT", "payload": payload}

    @classmethod
    def from_wire(cls, frame: dict[str, Any]) -> Chunk:
        """The chunk a wire frame stands for (what the Python client reads from a server).

        Args:
            frame: ``{"type", "runId", "payload"}`` with camelCase payload keys.
        """
        return cls(frame["type"], frame.get("runId", ""), payload_from_wire(frame.get("payload") or {}))


def wire_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A pause payload as Mastra sends it: camelCase, with ``resumeSchema`` as a JSON string (Mastra's
    clients ``JSON.parse`` it)."""
    out = camelize(payload)
    schema = out.get("resumeSchema")
    if schema is not None and not isinstance(schema, str):
        out["resumeSchema"] = json.dumps(schema, separators=(",", ":"))
    return out


def payload_from_wire(payload: dict[str, Any]) -> dict[str, Any]:
    """The inverse of ``wire_payload``: snake_case, ``resume_schema`` a dict again."""
    out = snakify(payload)
    schema = out.get("resume_schema")
    if isinstance(schema, str):
        out["resume_schema"] = json.loads(schema)
    return out


_SNAKE = re.compile(r"_([a-z0-9])")
_CAMEL = re.compile(r"([A-Z])")

# Keys whose values are user data (tool args, outputs, schemas): their own keys are left as they are.
_OPAQUE_KEYS = frozenset(
    {
        "args",
        "result",
        "suspend_payload",
        "resume_schema",
        "request_context",
        "edited_args",
        "resume_data",
        "usage_raw",
        "messages",
        "tool_origin",
    }
)


def _to_camel(key: str) -> str:
    return _SNAKE.sub(lambda m: m.group(1).upper(), key)


def _to_snake(key: str) -> str:
    return _CAMEL.sub(lambda m: "_" + m.group(1).lower(), key)


def _convert(value: Any, rename: Any, opaque: frozenset[str]) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            snake_key = _to_snake(key)
            out[rename(key)] = item if snake_key in opaque else _convert(item, rename, opaque)
        return out
    if isinstance(value, list):
        return [_convert(item, rename, opaque) for item in value]
    return value


def camelize(payload: dict[str, Any]) -> dict[str, Any]:
    converted = _convert(payload, _to_camel, _OPAQUE_KEYS)
    assert isinstance(converted, dict)
    return converted


def snakify(payload: dict[str, Any]) -> dict[str, Any]:
    converted = _convert(payload, _to_snake, _OPAQUE_KEYS)
    assert isinstance(converted, dict)
    return converted


__all__ = [
    "PAUSE_TYPES",
    "Chunk",
    "ChunkType",
    "PauseEvent",
    "camelize",
    "payload_from_wire",
    "snakify",
    "wire_payload",
]
