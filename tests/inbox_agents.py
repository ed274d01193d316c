"""The agents the approval-inbox tests serve (JSON route and browser): each one pauses for a human.

- ``ops`` deletes the record named by the user's message (``delete_record``, approval needed).
- ``planner`` books a table and asks how many people (``book_table`` ``suspend()``s; its resume schema is
  ``{people: int >= 1, seating: "indoor" | "outdoor"}``).
- ``sup`` delegates to its subagent ``data``, whose ``delete_record`` needs approval: the pause shows at
  the top, once, with the agent path ``["sup", "data"]``.

Every model answers, once its tools are done, with what each tool message said ("id=content | ..."),
so a test can read what the model was told (a decline's reason, a tool's result).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from helpers import RecordInput, echo_model
from pydantic import BaseModel, Field

from troupe import Agent, Runtime, SqliteStore, create_tool
from troupe.testing import CallLog, FunctionModel, text, tool_call


class TableQuestion(BaseModel):
    question: str


class TableAnswer(BaseModel):
    people: int = Field(ge=1, le=20, description="How many guests")
    seating: Literal["indoor", "outdoor"] = "indoor"


class NoInput(BaseModel):
    pass


def delete_tool(calls: CallLog) -> Any:
    def delete(inp: RecordInput, ctx: Any) -> dict[str, Any]:
        calls.record("delete_record", id=inp.id, run_id=ctx.run_id)
        return {"deleted": inp.id}

    return create_tool("delete_record", "Delete a record by id", RecordInput, delete, require_approval=True)


def booking_tool(calls: CallLog) -> Any:
    async def book(inp: NoInput, ctx: Any) -> dict[str, Any]:
        answer = ctx.agent.resume_data
        if answer is None:
            calls.record("book_table", phase="suspend")
            return await ctx.agent.suspend({"question": "How many people?"})
        calls.record("book_table", phase="resume", people=answer.people)
        return {"booked": answer.people, "seating": answer.seating}

    return create_tool(
        "book_table",
        "Book a table",
        NoInput,
        book,
        suspend_schema=TableQuestion,
        resume_schema=TableAnswer,
    )


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    return next(str(m["content"]) for m in reversed(messages) if m["role"] == "user")


def deleting_model() -> FunctionModel:
    """Deletes the record the user names (``call-1``), then reports its tool messages."""

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        answers = [m for m in messages if m["role"] == "tool"]
        if not answers:
            return tool_call("delete_record", {"id": _last_user_text(messages)}, id="call-1")
        return text(" | ".join(f"{m['tool_call_id']}={m['content']}" for m in answers))

    return FunctionModel(turn)


def delegating_model() -> FunctionModel:
    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        answers = [m for m in messages if m["role"] == "tool"]
        if not answers:
            return tool_call("agent-data", {"prompt": _last_user_text(messages)}, id="d1")
        return text("sup: " + " | ".join(f"{m['tool_call_id']}={m['content']}" for m in answers))

    return FunctionModel(turn)


def inbox_agents(calls: CallLog) -> list[Agent]:
    data = Agent(
        "data", description="Looks after records", model=deleting_model(), tools=[delete_tool(calls)]
    )
    return [
        Agent("ops", name="Operations", model=deleting_model(), tools=[delete_tool(calls)]),
        Agent("planner", model=echo_model(tool_call("book_table", {}, id="b1")), tools=[booking_tool(calls)]),
        Agent("sup", model=delegating_model(), agents={"data": data}),
    ]


def inbox_runtime(tmp_path: Path, calls: CallLog, **options: Any) -> Callable[[], Runtime]:
    def build() -> Runtime:
        return Runtime(
            inbox_agents(calls), storage=SqliteStore(tmp_path / "inbox.db"), executor="local", **options
        )

    return build
