"""Tools and models the tests share. Tools record executions in a CallLog so tests see them under Ray."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from troupe import AgentStream, Chunk, SqliteStore, create_tool
from troupe.testing import CallLog, FunctionModel, ScriptedModel, text, tool_call


class RecordInput(BaseModel):
    id: str


class PaymentInput(BaseModel):
    to: str
    amount: int


class AskCity(BaseModel):
    message: str


class CityAnswer(BaseModel):
    city: str


def delete_tool(log: CallLog, **options: Any):
    def delete(inp: RecordInput, ctx: Any) -> dict[str, Any]:
        log.record("delete_record", id=inp.id, run_id=ctx.run_id)
        return {"deleted": inp.id}

    return create_tool(
        "delete_record", "Delete a record by id", RecordInput, delete, **{"require_approval": True, **options}
    )


def pay_tool(log: CallLog, **options: Any):
    def pay(inp: PaymentInput, ctx: Any) -> dict[str, Any]:
        log.record("pay", to=inp.to, amount=inp.amount)
        return {"paid": inp.amount, "to": inp.to}

    return create_tool("pay", "Send money", PaymentInput, pay, **options)


def weather_tool(log: CallLog, **options: Any):
    async def weather(inp: Any, ctx: Any) -> dict[str, Any]:
        if ctx.agent.resume_data is None:
            log.record("weather", phase="suspend")
            return await ctx.agent.suspend({"message": "Which city?"})
        log.record("weather", phase="resume", city=ctx.agent.resume_data.city)
        return {"city": ctx.agent.resume_data.city, "forecast": "sunny"}

    class NoInput(BaseModel):
        pass

    return create_tool(
        "weather",
        "Weather for a city",
        NoInput,
        weather,
        suspend_schema=AskCity,
        resume_schema=CityAnswer,
        **options,
    )


def echo_model(*first_turn: Any) -> FunctionModel:
    """Makes ``first_turn`` on the first model call; afterwards answers with every tool message it has
    seen, in order ("id=content | ..."), so tests can read what the model was told."""

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        tool_messages = [m for m in messages if m["role"] == "tool"]
        if not tool_messages:
            return list(first_turn)
        return text(" | ".join(f"{m['tool_call_id']}={m['content']}" for m in tool_messages))

    return FunctionModel(turn)


def one_call(name: str, args: dict[str, Any], id: str = "call-1") -> FunctionModel:
    return echo_model(tool_call(name, args, id=id))


def script_used_up(model: ScriptedModel, executor: str) -> None:
    """The story played every turn of its script. Checked where the model ran in this process
    (``executor="local"``); under Ray it ran in the agent's actor, whose cursor the test cannot see."""
    if executor == "local":
        model.assert_complete()


async def chunks_of(stream: AgentStream) -> list[Chunk]:
    return [c async for c in stream.full_stream]


def types_of(chunks: list[Chunk]) -> list[str]:
    return [c.type for c in chunks]


def sqlite_audit(db: str | os.PathLike[str], run_id: str) -> list[Any]:
    """The run's audit entries, read from a server's SQLite file. In a thread of its own, so it works from
    any test (Playwright's sync API keeps an event loop running in the test's thread)."""

    async def read() -> list[Any]:
        store = SqliteStore(db)
        try:
            return await store.list_audit(run_id)
        finally:
            await store.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, read()).result()


def node_report(node: str | os.PathLike[str], folder: Path, *args: str) -> Any:
    """Run a Node script of ``folder`` (a client others wrote, driven by a script of ours) and return the
    JSON report it prints last; its stderr is the failure message."""
    done = subprocess.run(
        [str(node), *args], cwd=folder, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
