"""Troupe served over MCP (issue 41): a client that cancels its tool call (the Python ``mcp`` SDK sends
``notifications/cancelled`` when the task awaiting the call is cancelled) cancels the run that call
started, as the key's principal, through the agent's own cancel."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from blocking import wait_for
from cancel_agents import phases, worker
from mcp_clients import mcp_client
from troupe.api.mcp_server import CLIENT_CANCELLED

from troupe import Runtime, SqliteStore
from troupe.testing import CallLog


async def test_a_client_that_cancels_its_tool_call_cancels_the_run(
    http_server, tmp_path: Path, calls: CallLog
):
    gate, db = str(tmp_path / "gate"), tmp_path / "m.db"
    server = http_server(
        lambda: Runtime([worker(calls, gate)], storage=SqliteStore(db), executor="local"),
        keys={"key-kim": {"name": "kim", "resources": ["r1"]}},
    )
    async with mcp_client(server.url, "key-kim", None) as client:
        call = asyncio.create_task(client.call_tool("worker", {"prompt": "work please", "resourceId": "r1"}))
        await wait_for(lambda: phases(calls, "work") == ["started"], what="the run's tool to start")
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call

    store = SqliteStore(db)
    try:
        (run_id,) = {e["run_id"] for e in calls.entries("work")}
        async with asyncio.timeout(30):
            while await store.load_run(run_id) is not None:
                await asyncio.sleep(0.05)
        entry = next(
            e for e in await store.list_audit(run_id) if e.kind == "cancelled" and not e.tool_call_id
        )
        assert (entry.decided_by, entry.surface, entry.reason) == ("kim", "mcp", CLIENT_CANCELLED)
    finally:
        await store.close()
    await asyncio.sleep(0.2)
    assert phases(calls, "work") == ["started"] and phases(calls, "worker") == ["turn"]
