"""OpenAI chat-format messages: what the loop keeps in the run state and sends to the model."""

from __future__ import annotations

import json
from typing import Any

from troupe.core.vocabulary.errors import InvalidOptionError
from troupe.core.vocabulary.model import ToolCallPart

_ROLES = frozenset({"system", "user", "assistant", "tool"})


def normalize_messages(messages: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A string is one user message; a list must hold ``{"role", "content"}`` dicts."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if not isinstance(messages, list) or not messages:
        raise InvalidOptionError("messages must be a string or a non-empty list of {role, content} dicts")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES or "content" not in message:
            raise InvalidOptionError(
                f"messages[{i}] must be a dict with 'role' (one of {sorted(_ROLES)}) and 'content'"
            )
        out.append(dict(message))
    return out


def assistant_message(text: str, calls: list[ToolCallPart]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.args if isinstance(call.args, str) else json.dumps(call.args),
                },
            }
            for call in calls
        ]
    return message


def tool_message(tool_call_id: str, output: Any) -> dict[str, Any]:
    content = output if isinstance(output, str) else json.dumps(output, default=str)
    return {"role": "tool", "tool_call_id": tool_call_id, "content": content}


def last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


__all__ = ["assistant_message", "last_user_text", "normalize_messages", "tool_message"]
