"""The agent behind ``troupe demo`` and ``troupe serve --demo``: ``records-assistant``, with a records
table it may delete from (each deletion needs a person's approval) and a table-booking tool that asks
for the party size itself. Its records live beside the run store, in the same SQLite file, so every
process serving the demo sees the same ones. See ``troupe.ops.demo`` for the terminal session around it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from troupe.core.models.testing import FunctionModel, Turn, text, tool_call
from troupe.core.vocabulary.model import Model
from troupe.core.vocabulary.tools import Tool, ToolContext, create_tool
from troupe.storage.private_file import create_private
from troupe.supervisor.agent import Agent

AGENT_ID = "records-assistant"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
SAMPLE_RECORDS = (
    ("abc-123", "Duplicate invoice #1042"),
    ("def-456", "Customer: Ada Lovelace"),
    ("ghi-789", "Meeting notes, 2 May"),
)
INSTRUCTIONS = (
    "You manage a small records database and book restaurant tables. Delete records with delete_record "
    "(a person approves each deletion) and book tables with book_table (it asks the person for the party "
    "size itself; do not ask in text). Do the tasks in the order asked, one tool call at a time. Finish "
    "with a short summary of what happened; if a deletion was declined, repeat the person's reason."
)


# ---- the demo's records: a table next to the run store, reachable from any process --------------------


class RecordsDB:
    """The records and bookings the tools act on. Plain sqlite3, opened per call: the tools run in the
    agent's Ray actor (another process), so the data must live in a file, not in this process."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            with conn:
                yield conn
        finally:
            conn.close()

    def setup(self, *, seed: bool) -> None:
        """Create the tables; ``seed`` puts back any sample record a previous demo deleted. The file is
        the demo's run store too, so it is made private first, as the store makes its own."""
        create_private(Path(self.path))
        with self._connect() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS demo_records (id TEXT PRIMARY KEY, title TEXT NOT NULL)")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS demo_bookings (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                "restaurant TEXT NOT NULL, time TEXT NOT NULL, people INTEGER NOT NULL)"
            )
            if seed:
                conn.executemany(
                    "INSERT OR IGNORE INTO demo_records (id, title) VALUES (?, ?)", SAMPLE_RECORDS
                )

    def records(self) -> list[tuple[str, str]]:
        with self._connect() as conn:
            rows = conn.execute("SELECT id, title FROM demo_records ORDER BY id")
            return [(str(r[0]), str(r[1])) for r in rows]

    def delete(self, record_id: str) -> bool:
        with self._connect() as conn:
            return conn.execute("DELETE FROM demo_records WHERE id = ?", (record_id,)).rowcount > 0

    def book(self, restaurant: str, time: str, people: int) -> int:
        with self._connect() as conn:
            cursor = conn.execute(
                "INSERT INTO demo_bookings (restaurant, time, people) VALUES (?, ?, ?)",
                (restaurant, time, people),
            )
            return int(cursor.lastrowid or 0)


# ---- tools ------------------------------------------------------------------------------------------


class RecordId(BaseModel):
    id: str = Field(description="The id of the record, e.g. abc-123")


class TableRequest(BaseModel):
    restaurant: str = Field("Chez Troupe", description="Where to book")
    time: str = Field("19:30", description="When, e.g. 19:30")


class PartySizeQuestion(BaseModel):
    question: str


class PartySize(BaseModel):
    people: int = Field(ge=1, le=20, description="How many people the table is for")


def make_tools(db: RecordsDB) -> list[Tool]:
    def delete_record(inp: RecordId, ctx: ToolContext) -> dict[str, Any]:
        if not db.delete(inp.id):
            raise LookupError(f"there is no record with id {inp.id!r}")
        return {"deleted": inp.id}

    async def book_table(inp: TableRequest, ctx: ToolContext) -> dict[str, Any]:
        answer = ctx.agent.resume_data
        if answer is None:
            return await ctx.agent.suspend({"question": "For how many people?"})
        booking = db.book(inp.restaurant, inp.time, answer.people)
        return {"booked": booking, "restaurant": inp.restaurant, "time": inp.time, "people": answer.people}

    return [
        create_tool(
            "delete_record",
            "Delete a record by id. Destructive: a person approves it first.",
            RecordId,
            delete_record,
            require_approval=True,
        ),
        create_tool(
            "book_table",
            "Book a restaurant table. Asks the person for the party size.",
            TableRequest,
            book_table,
            suspend_schema=PartySizeQuestion,
            resume_schema=PartySize,
        ),
    ]


# ---- the model: OpenAI when a key is set, otherwise a deterministic stand-in ---------------------------

_RECORD_ID = re.compile(r"\b[a-z]{3}-\d{3}\b")


def scripted_turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Turn:
    """The stand-in model: its turn is a function of the conversation, so a run resumed in a new process
    gets the same answers. Delete the record, then book a table, then summarise what the tools said
    (a decline reason included)."""
    names = {
        call["id"]: call["function"]["name"]
        for message in messages
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or ()
    }
    outputs = {names.get(m["tool_call_id"]): str(m["content"]) for m in messages if m.get("role") == "tool"}
    user = next((str(m["content"]) for m in messages if m.get("role") == "user"), "")
    found = _RECORD_ID.search(user)
    record_id = found.group(0) if found else SAMPLE_RECORDS[0][0]
    if "delete_record" not in outputs:
        return [
            text(f"First I'll delete record {record_id}; that needs your approval. "),
            tool_call("delete_record", {"id": record_id}, id="call-delete"),
        ]
    if "book_table" not in outputs:
        return [
            text("Now I'll book the table. "),
            tool_call("book_table", {"restaurant": "Chez Troupe", "time": "19:30"}, id="call-book"),
        ]
    return text(
        f"{_deletion_outcome(record_id, outputs['delete_record'])} {_booking_outcome(outputs['book_table'])}"
    )


def json_or_none(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return None


def _deletion_outcome(record_id: str, content: str) -> str:
    data = json_or_none(content)
    if isinstance(data, dict) and data.get("deleted"):
        return f"Deleted record {data['deleted']}."
    if isinstance(data, dict) and "error" in data:
        return f"Could not delete record {record_id}: {data['error']}."
    return f"Record {record_id} was not deleted; you declined: {content}."


def _booking_outcome(content: str) -> str:
    data = json_or_none(content)
    if isinstance(data, dict) and data.get("booked"):
        people = data["people"]
        party = f"{people} {'person' if people == 1 else 'people'}"
        where = f"at {data['restaurant']} at {data['time']}"
        return f"Booked a table for {party} {where} (booking #{data['booked']})."
    if isinstance(data, dict) and "error" in data:
        return f"Could not book a table: {data['error']}."
    return f"No table was booked: {content}."


def choose_model(env: Mapping[str, str] = os.environ) -> tuple[Model | str, str]:
    """The model to use and how to describe it in the header."""
    if env.get("OPENAI_API_KEY"):
        name = env.get("OPENAI_MODEL") or DEFAULT_OPENAI_MODEL
        model = name if name.startswith("openai/") else f"openai/{name}"
        where = f" via {env['OPENAI_BASE_URL']}" if env.get("OPENAI_BASE_URL") else ""
        return model, f"{model}{where} (OPENAI_API_KEY is set)"
    return (
        FunctionModel(scripted_turn),
        "scripted FunctionModel (no OPENAI_API_KEY; set it to use openai/gpt-4o-mini)",
    )


def build_agent(db: RecordsDB, model: Model | str) -> Agent:
    return Agent(
        AGENT_ID, name="Records assistant", instructions=INSTRUCTIONS, model=model, tools=make_tools(db)
    )


__all__ = ["AGENT_ID", "RecordsDB", "build_agent", "choose_model", "json_or_none", "scripted_turn"]
