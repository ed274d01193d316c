"""Auto-resume: the next user message on a thread answers a tool that paused itself with ``suspend()``.

The agent's own model turns the message into ``resume_data`` (structured output against the tool's
``resume_schema``). Only ``suspend()`` pauses are answered this way: an approval is a human's decision
and no model output can ever make one.
"""

from __future__ import annotations

import json
from typing import Any

from troupe.core.vocabulary.model import Model, ModelRequest, TextDelta
from troupe.core.vocabulary.state import Pause, RunState, ToolCallState
from troupe.core.vocabulary.store import Store, SuspendedRunQuery

EXTRACTION_PROMPT = (
    "Extract the answer to a paused tool's question from the user's latest message.\n"
    "The tool {tool!r} asked: {question}\n"
    "Reply with one JSON object matching this JSON schema and nothing else: {schema}"
)


async def find_resumable(
    store: Store, agent_id: str, thread_id: str, resource_id: str | None
) -> tuple[RunState, ToolCallState, Pause] | None:
    """The newest ``suspend()`` pause waiting on the thread, if any."""
    runs, _ = await store.list_suspended_runs(
        SuspendedRunQuery(agent_id=agent_id, thread_id=thread_id, resource_id=resource_id)
    )
    for state in runs:
        for call, pause in reversed(state.open_pauses()):
            if pause.kind == "suspend" and pause.resume_schema is not None:
                return state, call, pause
    return None


async def extract_resume_data(model: Model, pause: Pause, user_text: str) -> Any | None:
    """Ask the model for the resume data in the user's words; None if it gave no JSON object."""
    system = EXTRACTION_PROMPT.format(
        tool=pause.tool_name,
        question=json.dumps(pause.suspend_payload),
        schema=json.dumps(pause.resume_schema),
    )
    request = ModelRequest(
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user_text}],
        tools=[],
        response_schema=pause.resume_schema,
    )
    text = "".join([e.text async for e in model.stream_turn(request) if isinstance(e, TextDelta)]).strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


__all__ = ["EXTRACTION_PROMPT", "extract_resume_data", "find_resumable"]
