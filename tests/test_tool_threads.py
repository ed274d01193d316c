"""Sync tools run in a worker thread: one that blocks holds a thread, not the agent's event loop, so the
agent's other runs pause, take decisions and finish meanwhile (on both executors)."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import pytest
from helpers import delete_tool
from pydantic import BaseModel

from troupe import Agent, Runtime, create_tool
from troupe.testing import CallLog, FunctionModel, text, tool_call

# How long a blocked tool waits for its gate before giving up. Only reached when the tool stalls the very
# loop the test needs to open the gate (the defect these tests catch), so it bounds such a failure.
GATE_TIMEOUT_S = 15.0


class Gate:
    """A listening socket the test holds. The tool connects (so the test knows it has started) and blocks
    reading from it, as a tool waiting on the network does, until the test opens the gate. A socket works
    across processes, so the same gate holds a tool inside a Ray actor."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(60.0)
        self.port = self.server.getsockname()[1]
        self._held: list[socket.socket] = []

    async def entered(self) -> None:
        """Wait until a tool is blocked at the gate."""
        conn, _ = await asyncio.to_thread(self.server.accept)
        self._held.append(conn)

    def open(self) -> None:
        for conn in self._held:
            conn.sendall(b"go")
            conn.close()
        self._held.clear()

    def close(self) -> None:
        self.open()
        self.server.close()


class NoInput(BaseModel):
    pass


def gated_tool(port: int, log: CallLog) -> Any:
    def wait_at_gate(inp: NoInput, ctx: Any) -> dict[str, Any]:
        got = ""
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=GATE_TIMEOUT_S) as conn:
                got = conn.recv(2).decode()  # blocks this thread until the test opens the gate
        finally:
            log.record("wait_at_gate", phase="end", got=got)
        return {"got": got}

    return create_tool("wait_at_gate", "Wait for the gate", NoInput, wait_at_gate)


def by_prompt() -> FunctionModel:
    """Calls the tool the user's message names; answers with the tool's result once it has one."""

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if results:
            return text(f"done: {results[-1]}")
        if messages[-1]["content"] == "wait":
            return tool_call("wait_at_gate", {}, id="w1")
        return tool_call("delete_record", {"id": "r1"}, id="d1")

    return FunctionModel(turn)


@pytest.fixture
def gate() -> Any:
    opened = Gate()
    yield opened
    opened.close()


async def test_a_blocked_sync_tool_does_not_hold_up_another_runs_approval(make_runtime, calls, gate):
    agent = Agent("ops", model=by_prompt(), tools=[gated_tool(gate.port, calls), delete_tool(calls)])
    make_runtime([agent])

    blocked = asyncio.create_task(agent.generate("wait"))
    await gate.entered()

    # Another run of the same agent (same host, same event loop) goes through a whole approval cycle.
    paused = await agent.generate("delete")
    assert paused.finish_reason == "suspended"
    done = await agent.approve_tool_call_generate(run_id=paused.run_id)
    assert done.finish_reason == "stop"
    assert [e["id"] for e in calls.entries("delete_record")] == ["r1"]
    # ...all while the first run's tool was still waiting at the gate.
    assert calls.entries("wait_at_gate") == []
    assert not blocked.done()

    gate.open()
    first = await blocked
    assert first.text == 'done: {"got": "go"}'
    assert [e["got"] for e in calls.entries("wait_at_gate")] == ["go"]


class Where(BaseModel):
    label: str


def thread_tools(log: CallLog) -> list[Any]:
    def record(inp: Where, ctx: Any) -> dict[str, Any]:
        log.record("where", label=inp.label, thread=threading.current_thread().name)
        return {}

    async def record_async(inp: Where, ctx: Any) -> dict[str, Any]:
        return record(inp, ctx)

    return [
        create_tool("sync_where", "Where a sync tool runs", Where, record),
        create_tool("async_where", "Where an async tool runs", Where, record_async),
    ]


async def test_sync_tools_run_in_worker_threads_and_async_tools_on_the_loop(make_runtime, calls):
    model = FunctionModel(
        lambda messages, tools: (
            text("ok")
            if any(m["role"] == "tool" for m in messages)
            else [
                tool_call("sync_where", {"label": "sync"}, id="s1"),
                tool_call("async_where", {"label": "async"}, id="a1"),
            ]
        )
    )
    agent = Agent("where", model=model, tools=thread_tools(calls))
    make_runtime([agent], tool_threads=2)

    assert (await agent.generate("go")).text == "ok"
    threads = {e["label"]: e["thread"] for e in calls.entries("where")}
    assert threads["sync"].startswith("troupe-tool")
    assert not threads["async"].startswith("troupe-tool")


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_tool_threads_must_be_a_positive_integer(size: Any):
    with pytest.raises(ValueError, match="tool_threads must be a positive integer"):
        Runtime([], tool_threads=size, executor="local")
