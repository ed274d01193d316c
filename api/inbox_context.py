"""What a person needs beside a pause to decide it: the request that started the run, what the model
said just before the call, what the tool is for, and who asked (the agent path, already on the pause).

Read from the run's own snapshot; every text is clipped, so a long conversation never makes the inbox
heavy. Values are plain JSON for the inbox listing's ``context`` field.
"""

from __future__ import annotations

from typing import Any

from troupe.core.vocabulary.errors import TroupeError
from troupe.core.vocabulary.state import Pause, RunState
from troupe.core.vocabulary.storable import text_problem
from troupe.supervisor.runtime import Runtime

MAX_CHARS = 2000


def _clip(text: Any) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return None
    if text_problem(text, 10**9) is not None:
        return "(cannot be shown: not valid Unicode)"
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "\u2026"


def _content_text(content: Any) -> str | None:
    if isinstance(content, list):  # OpenAI content parts
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return _clip(content)


def _request(state: RunState) -> str | None:
    """The user's message that started this run (after any history loaded from its thread)."""
    own = state.messages[state.memory_saved :] or state.messages
    return next((_content_text(m.get("content")) for m in own if m.get("role") == "user"), None)


def _said_before(state: RunState, tool_call_id: str) -> str | None:
    """The text of the model's turn that made the call (said before it)."""
    for message in reversed(state.messages):
        calls = message.get("tool_calls") or ()
        if message.get("role") == "assistant" and any(c.get("id") == tool_call_id for c in calls):
            return _content_text(message.get("content"))
    return None


def _description(runtime: Runtime, pause: Pause) -> str | None:
    """The description of the tool that paused, on the agent at the end of the path (or as the tool's
    source gave it: an MCP server's tools are found by the agent's host, not defined here)."""
    origin = pause.tool_origin or {}
    try:
        agent = runtime.get_agent(pause.agent_path[-1])
    except (IndexError, TroupeError):  # no path, or an agent this server no longer serves
        return _clip(origin.get("description"))
    tool = agent.tools.get(pause.tool_name)
    return _clip(tool.description) if tool is not None else _clip(origin.get("description"))


def call_context(runtime: Runtime, state: RunState) -> dict[str, dict[str, Any]]:
    """``{tool_call_id: context}`` for the run's open pauses."""
    request = _request(state)
    return {
        call.tool_call_id: {
            "request": request,
            "modelText": _said_before(state, call.tool_call_id),
            "toolDescription": _description(runtime, pause),
        }
        for call, pause in state.open_pauses()
    }


__all__ = ["call_context"]
