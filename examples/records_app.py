"""The Quick start's agent as an application: ``troupe serve --app examples.records_app:runtime`` (and
``troupe mcp``, ``serve run troupe.front_door:app app=examples.records_app:runtime``), from the
repository's root. Your own module:attribute takes its place.

Its runs live in ``troupe-app.db`` in the working directory, by its absolute path, so every replica of
``--replicas N`` reaches the same file.
"""

from __future__ import annotations

import os

from pydantic import BaseModel

from troupe import Agent, Runtime, SqliteStore, create_tool
from troupe.testing import FunctionModel, text, tool_call


class RecordId(BaseModel):
    id: str


def _turn(messages: list[dict], tools: list[dict]) -> object:
    """Delete the record the person names; then say what happened (restart-safe: it reads the
    conversation, not a script position)."""
    told = [m for m in messages if m["role"] == "tool"]
    if told:
        return text(f"Done: {told[-1]['content']}")
    asked = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    record = asked.split()[-1].strip(".") if asked.split() else "abc-123"
    return tool_call("delete_record", {"id": record}, id="call-1")


delete_record = create_tool(
    "delete_record",
    "Delete a record by id",
    RecordId,
    lambda inp, ctx: {"deleted": inp.id},
    require_approval=True,
)

records = Agent(
    "records", instructions="You manage records.", model=FunctionModel(_turn), tools=[delete_record]
)

runtime = Runtime([records], storage=SqliteStore(os.path.abspath("troupe-app.db")))
