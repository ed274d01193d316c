"""Agents the cancel tests share: models and tools that wait on a gate file (so a test, or a process that
kills another, can act while a model turn or a tool is in progress, on either executor), and record in a
CallLog what they did and what each model was told."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from helpers import delete_tool
from pydantic import BaseModel

from troupe import Agent, create_tool
from troupe.testing import CallLog, FunctionModel, text, tool_call


class Job(BaseModel):
    name: str


async def until(path: str) -> None:
    while not os.path.exists(path):
        await asyncio.sleep(0.02)


def until_blocking(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.02)


def told(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "tool"]


def reporting(log: CallLog, name: str, first: Any, gate: str | None = None) -> FunctionModel:
    """A model that makes ``first`` (a turn) unless it has been told something, then answers with what it
    was told; each turn is recorded (``name``), and with ``gate`` its first turn waits for that file."""

    async def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        heard = told(messages)
        log.record(name, phase="turn", told=heard)
        if heard:
            return text(f"{name}: " + " | ".join(heard))
        if gate is not None:
            await until(gate)
            log.record(name, phase="turn-finished")
        return first

    return FunctionModel(turn)


def work_tool(log: CallLog, gate: str, *, sync: bool = False, tidies: bool = False, **options: Any) -> Any:
    """``work``: records "started", waits for ``gate``, records "finished"; sync or async. ``tidies``:
    the async one catches a cancel, records "tidied" and returns (as a tool that cleans up might)."""

    async def work_async(inp: Job, ctx: Any) -> dict[str, Any]:
        log.record("work", phase="started", run_id=ctx.run_id)
        try:
            await until(gate)
        except asyncio.CancelledError:
            if not tidies:
                raise
            log.record("work", phase="tidied")
            return {"tidied": inp.name}
        log.record("work", phase="finished")
        return {"done": inp.name}

    def work_sync(inp: Job, ctx: Any) -> dict[str, Any]:
        log.record("work", phase="started", run_id=ctx.run_id)
        until_blocking(gate)
        log.record("work", phase="finished")
        return {"done": inp.name}

    return create_tool("work", "Do a piece of work", Job, work_sync if sync else work_async, **options)


def worker(
    log: CallLog,
    gate: str,
    *,
    sync: bool = False,
    tidies: bool = False,
    model_gate: str | None = None,
    **options: Any,
) -> Agent:
    """Calls ``work`` once (its model's first turn may wait on ``model_gate``), then reports."""
    first = tool_call("work", {"name": "job-1"}, id="w1")
    return Agent(
        "worker",
        model=reporting(log, "worker", first, model_gate),
        tools=[work_tool(log, gate, sync=sync, tidies=tidies, **options)],
    )


def phases(log: CallLog, name: str) -> list[str]:
    return [e["phase"] for e in log.entries(name)]


def tree(log: CallLog, depth: int) -> Agent:
    """top -> mid -> leaf. The agent at ``depth`` (1 top, 2 mid, 3 leaf) calls the gated ``delete_record``
    itself instead of delegating further; each model then reports what it was told."""

    def level(name: str, below: Agent | None, key: str, call_id: str) -> Agent:
        if below is None:
            first = tool_call("delete_record", {"id": name}, id=call_id)
            return Agent(name, model=reporting(log, name, first), tools=[delete_tool(log)])
        first = tool_call(f"agent-{key}", {"prompt": "go on"}, id=call_id)
        return Agent(name, model=reporting(log, name, first), agents={key: below})

    leaf = level("leaf", None, "", "l1") if depth == 3 else None
    mid = level("mid", leaf, "leaf", "m1") if depth >= 2 else None
    return level("top", mid, "mid", "t1")


__all__ = ["Job", "phases", "reporting", "told", "tree", "until", "until_blocking", "work_tool", "worker"]
