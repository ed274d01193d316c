"""Durations a user gives (a pause's approval_timeout, a run's max_duration_s, a tool's, an MCP server's
or a remote A2A agent's timeout_s) are checked where they are given: an odd one (0, negative, NaN,
infinite, past what a date can hold, a string) is refused at once with an error naming it, before any
model turn, never by a run that fails half-way when it turns the duration into a date."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from helpers import RecordInput, delete_tool
from troupe.core.vocabulary.seconds import MAX_SECONDS

from troupe import A2AAgent, Agent, MCPHttp, MCPStdio, Runtime, SqliteStore, create_tool
from troupe.errors import InvalidOptionError
from troupe.testing import FunctionModel, text, tool_call

ODD = [0, -1, float("nan"), float("inf"), float("-inf"), 1e12, MAX_SECONDS + 1, "30", True]


def counting_model(turns: list[int]) -> FunctionModel:
    def turn(messages: list[dict[str, Any]], tools: Any) -> Any:
        turns.append(1)
        if messages[-1]["role"] == "tool":
            return text("done")
        return tool_call("delete_record", {"id": "a"}, id="call-1")

    return FunctionModel(turn)


@pytest.mark.parametrize("option", ["approval_timeout", "max_duration_s"])
@pytest.mark.parametrize("value", ODD, ids=repr)
async def test_an_odd_duration_of_a_run_is_refused_before_anything_runs(tmp_path, calls, option, value):
    turns: list[int] = []
    agent = Agent("ops", model=counting_model(turns), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        with pytest.raises(InvalidOptionError, match=f"{option} must be a number of seconds") as refused:
            await agent.generate("delete a", **{option: value})
        assert refused.value.details["option"] == option
        assert turns == [], "no model turn was paid for"
        assert (await agent.list_suspended_runs()).total == 0
    finally:
        await runtime.shutdown()


async def test_the_longest_duration_allowed_still_makes_a_deadline(tmp_path, calls):
    turns: list[int] = []
    agent = Agent("ops", model=counting_model(turns), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        paused = await agent.generate("delete a", approval_timeout=MAX_SECONDS, max_duration_s=MAX_SECONDS)
        assert paused.finish_reason == "suspended"
        [run] = (await agent.list_suspended_runs()).runs
        expires = run.pending[0].expires_at
        assert expires is not None and expires - run.suspended_at >= timedelta(seconds=MAX_SECONDS - 60)
    finally:
        await runtime.shutdown()


@pytest.mark.parametrize("value", ODD, ids=repr)
def test_an_odd_timeout_of_a_tool_or_a_server_or_a_remote_agent_is_refused(value):
    with pytest.raises(TypeError, match="tool 'delete_record': timeout_s must be a number of seconds"):
        create_tool("delete_record", "Delete", RecordInput, lambda inp, ctx: {}, timeout_s=value)
    with pytest.raises(ValueError, match="MCPStdio 'files': timeout_s must be a number of seconds"):
        MCPStdio("files", "npx", timeout_s=value)
    with pytest.raises(ValueError, match="MCPHttp 'files': timeout_s must be a number of seconds"):
        MCPHttp("files", "http://127.0.0.1:9/mcp", timeout_s=value)
    with pytest.raises(ValueError, match="A2A agent 'vendor': timeout_s must be a number of seconds"):
        A2AAgent("vendor", card_url="http://127.0.0.1:9/", timeout_s=value)


@pytest.mark.parametrize("option", ["in_doubt_default_s", "in_doubt_margin_s"])
@pytest.mark.parametrize("value", [v for v in ODD if v != 0], ids=repr)
def test_an_odd_time_a_call_stays_in_doubt_is_refused_when_the_runtime_is_made(option, value):
    """A call in doubt after a takeover is fenced until its start plus these: a time past what a date
    holds would fail there, when the run is taken over, rather than here."""
    with pytest.raises(ValueError, match=f"{option} must be a number of seconds 0 or more"):
        Runtime([], executor="local", **{option: value})
    Runtime([], executor="local", **{option: 0})  # 0 is a time: in doubt no longer than the call took
