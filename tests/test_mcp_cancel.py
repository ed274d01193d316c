"""An MCP call in flight, cancelled from outside (as a run's cancel or a tool's timeout does: by
cancelling the asyncio task that awaits the tool) or past its server's ``timeout_s``: the server
receives MCP's ``notifications/cancelled`` for that request, with its id and a reason; the cancellation
completes at once, leaves nothing of the call behind, and the session serves the next call. An open
cancelled midway (its host shutting down) leaves no session behind. With the hand-written server over
stdio and over streamable HTTP (it records what it receives), and with the real server-everything's
long-running tool (its stdin recorded on the way)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from blocking import wait_for
from mcp_servers import RawServer, everything, recorded
from troupe.actors.mcp.connection import MCPConnection
from troupe.actors.mcp.tools import build_tools
from troupe.core.vocabulary.mcp_servers import MCPServer
from troupe.core.vocabulary.tools import Tool, ToolContext


class Session:
    """One MCP session as an agent host holds it, and its tools as a run calls them."""

    def __init__(self, connection: MCPConnection, tools: dict[str, Tool]) -> None:
        self.connection = connection
        self.tools = tools

    def call(self, name: str, args: dict[str, Any], call_id: str) -> asyncio.Task[Any]:
        ctx = ToolContext(run_id="run-1", tool_call_id=call_id, agent_id="agent")
        return asyncio.get_running_loop().create_task(self.tools[name].run(args, ctx))


@pytest.fixture
async def session() -> AsyncIterator[Any]:
    opened: list[MCPConnection] = []

    async def open_session(server: MCPServer) -> Session:
        listed: list[list[dict[str, Any]]] = []
        connection = MCPConnection(server, lambda _, tools: listed.append(tools))
        await connection.open()
        opened.append(connection)
        return Session(connection, build_tools(connection, listed[-1])[0])

    yield open_session
    for connection in opened:
        await connection.close()


async def cancel_and_settle(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait for it to end; ending takes no server's answer, so a bound far below
    the server's 300 s timeout catches a cancel that waits for one."""
    task.cancel()
    async with asyncio.timeout(30):
        with pytest.raises(asyncio.CancelledError):
            await task


def cancelled_notices(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m["params"] for m in messages if m.get("method") == "notifications/cancelled"]


def call_request(messages: list[dict[str, Any]], tool: str) -> dict[str, Any] | None:
    calls = [m for m in messages if m.get("method") == "tools/call" and m["params"]["name"] == tool]
    return calls[0] if calls else None


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_cancelled_call_is_cancelled_at_the_server_and_the_session_goes_on(
    session, tmp_path, transport
):
    raw = RawServer(transport, tmp_path / "received.jsonl")
    try:
        mcp = await session(raw.spec("--objects-only"))
        slow = mcp.call("slow", {}, "c1")
        await wait_for(lambda: call_request(raw.received(), "slow") is not None, what="the call to reach it")
        await cancel_and_settle(slow)
        assert mcp.connection.calls == {}  # nothing of the call is left in flight

        request = call_request(raw.received(), "slow")
        assert request is not None
        await wait_for(lambda: cancelled_notices(raw.received()), what="notifications/cancelled")
        [notice] = cancelled_notices(raw.received())
        assert notice["requestId"] == request["id"]
        assert isinstance(notice["reason"], str) and notice["reason"]

        assert await mcp.call("good", {}, "c2") == "fine"
    finally:
        raw.stop()


async def test_a_call_past_the_servers_timeout_fails_and_is_cancelled_at_the_server(session, tmp_path):
    raw = RawServer("stdio", tmp_path / "received.jsonl")
    mcp = await session(raw.spec("--objects-only", timeout_s=0.5))
    assert mcp.tools["slow"].execute.timeout_s == 0.5  # type: ignore[attr-defined]
    with pytest.raises(TimeoutError, match=r"no answer from the MCP server within 0\.5 s"):
        await mcp.call("slow", {}, "c1")
    request = call_request(raw.received(), "slow")
    assert request is not None
    await wait_for(lambda: cancelled_notices(raw.received()), what="notifications/cancelled")
    assert [n["requestId"] for n in cancelled_notices(raw.received())] == [request["id"]]
    assert await mcp.call("good", {}, "c2") == "fine"


async def test_server_everything_hears_the_cancel_of_its_long_running_operation(session, tmp_path):
    log = tmp_path / "stdin.jsonl"
    mcp = await session(recorded(everything(), log))
    received = lambda: [json.loads(line) for line in Path(log).read_text().splitlines()]  # noqa: E731
    operation = mcp.call("trigger-long-running-operation", {"duration": 600, "steps": 600}, "c1")
    await wait_for(
        lambda: call_request(received(), "trigger-long-running-operation") is not None,
        what="the call to reach server-everything",
    )
    await cancel_and_settle(operation)

    request = call_request(received(), "trigger-long-running-operation")
    assert request is not None
    await wait_for(lambda: cancelled_notices(received()), what="notifications/cancelled")
    assert [n["requestId"] for n in cancelled_notices(received())] == [request["id"]]
    assert await mcp.call("echo", {"message": "still here"}, "c2") == "Echo: still here"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_open_cancelled_midway_leaves_no_session_behind(tmp_path, transport):
    raw = RawServer(transport, tmp_path / "received.jsonl")
    try:
        connection = MCPConnection(raw.spec("--unlisted"), lambda *_: None)
        opening = asyncio.get_running_loop().create_task(connection.open())
        listing = lambda: any(m.get("method") == "tools/list" for m in raw.received())  # noqa: E731
        await wait_for(listing, what="the tools to be listed")
        await cancel_and_settle(opening)
        assert not connection.alive
        sessions = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "MCPConnection._serve"]
        assert sessions == []
    finally:
        raw.stop()
