"""``troupe mcp``: the agents served over stdio to an MCP client that starts the process (the Python
SDK's client here). The approval comes as an elicitation and is decided as the principal the command
names; a client without elicitation gets the paused result; a key outside the keys file is refused."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from conftest import ROOT, TESTS
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from troupe.api.keys import digested, write_file

from troupe import SqliteStore
from troupe.testing import CallLog


def troupe_mcp(tmp_path: Path, *options: str) -> StdioServerParameters:
    env = {
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(ROOT)]),
        "TROUPE_TEST_DB": str(tmp_path / "mcp.db"),
        "TROUPE_TEST_CALLS": str(tmp_path / "calls.jsonl"),
        "RAY_TMPDIR": os.environ.get("RAY_TMPDIR", "/tmp"),
    }
    args = ["-m", "troupe.cli", "mcp", "--app", "mcp_stdio_app:runtime", *options]
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(TESTS))


async def approve(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"approved": True})


async def test_troupe_mcp_over_stdio_asks_and_approves_as_the_named_principal(tmp_path):
    async with Client(
        troupe_mcp(tmp_path, "--as", "alice"), elicitation_callback=approve, cache=None
    ) as client:
        assert {t.name for t in (await client.list_tools()).tools} == {"ops", "planner"}
        result = await client.call_tool("ops", {"prompt": "delete abc-123"})
    assert result.structured_content["status"] == "stop"
    assert CallLog(tmp_path / "calls.jsonl").count("delete_record") == 1
    audit = await SqliteStore(tmp_path / "mcp.db").list_audit(result.structured_content["runId"])
    assert [(e.kind, e.decided_by) for e in audit] == [("approved", "alice")]


async def test_troupe_mcp_without_elicitation_returns_the_paused_run(tmp_path):
    async with Client(troupe_mcp(tmp_path, "--public-url", "https://troupe.example"), cache=None) as client:
        result = await client.call_tool("ops", {"prompt": "delete abc-123"})
    paused = result.structured_content
    assert paused["status"] == "paused"
    assert paused["decide"]["inbox"] == "https://troupe.example/inbox"
    stored = await SqliteStore(tmp_path / "mcp.db").load_run(paused["runId"])
    assert stored is not None and stored.state.status == "suspended"


async def test_troupe_mcp_refuses_a_key_that_is_not_in_the_keys_file(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"key-a": {"name": "tenant-a", "resources": ["a1"]}}))
    with pytest.raises(Exception):  # noqa: B017 - the process exits before the handshake
        async with Client(troupe_mcp(tmp_path, "--keys", str(keys), "--key", "nope"), cache=None) as client:
            await client.list_tools()


async def test_troupe_mcp_with_a_key_of_one_resource_starts_runs_there_unnamed(tmp_path):
    keys = tmp_path / "keys.json"
    write_file(keys, digested({"key-a": {"name": "tenant-a", "resources": ["a1"]}}))
    async with Client(troupe_mcp(tmp_path, "--keys", str(keys), "--key", "key-a"), cache=None) as client:
        result = await client.call_tool("ops", {"prompt": "delete abc-123"})  # no resourceId
    assert not result.is_error, result.content
    paused = result.structured_content
    stored = await SqliteStore(tmp_path / "mcp.db").load_run(paused["runId"])
    assert stored is not None and stored.state.resource_id == "a1"
