"""MCP calls and the run they belong to, end to end on both executors (tests/test_mcp_cancel.py holds the
same at the actors level):

- ``cancel_run`` while the run is inside an MCP tool call: the server receives ``notifications/cancelled``
  for that request (the hand-written stdio server records what it receives);
- each MCP tool carries its server's ``timeout_s`` as the tool's: a call past it is the run's timed-out
  tool error, cancelled at the server; the time a person takes to answer an elicitation does not count
  (the run is paused, not the tool);
- a call paused on an elicitation whose run is cancelled does not stay open on the session: the server's
  question is answered ``cancel`` and its call cancelled (the real server-everything, its stdin recorded),
  whether this host cancelled the run, the cancel came down from a parent, or was recorded elsewhere.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from blocking import wait_for
from helpers import echo_model
from mcp_servers import RawServer, everything, recorded
from test_mcp_cancel import call_request, cancelled_notices
from test_mcp_elicitation import ANSWER, ELICIT

from troupe import Agent
from troupe.testing import tool_call


def raw_agent(raw: RawServer, **server: Any) -> Agent:
    """``h`` calls the raw server's ``slow`` tool (never answered), then says what it was told."""
    return Agent(
        "h",
        model=echo_model(tool_call("slow", {}, id="s1")),
        mcp_servers=[raw.spec("--objects-only", **server)],
    )


async def test_cancelling_a_run_in_an_mcp_call_cancels_the_call_at_the_server(make_runtime, tmp_path):
    raw = RawServer("stdio", tmp_path / "received.jsonl")
    runtime = make_runtime([raw_agent(raw)])
    agent = runtime.get_agent("h")
    stream = await agent.stream("go")
    await wait_for(lambda: call_request(raw.received(), "slow") is not None, what="the call to reach it")

    await agent.cancel_run(stream.run_id, reason="taking too long")
    result = await stream.result()
    assert result.finish_reason == "cancelled"
    request = call_request(raw.received(), "slow")
    assert request is not None
    await wait_for(lambda: cancelled_notices(raw.received()), what="notifications/cancelled")
    assert [n["requestId"] for n in cancelled_notices(raw.received())] == [request["id"]]


async def test_an_mcp_tool_times_out_after_its_servers_timeout_and_is_cancelled_there(make_runtime, tmp_path):
    raw = RawServer("stdio", tmp_path / "received.jsonl")
    runtime = make_runtime([raw_agent(raw, timeout_s=1.0)])
    result = await runtime.get_agent("h").generate("go")
    assert result.finish_reason == "stop"
    assert "tool 'slow' timed out after 1 s (its timeout_s)" in result.text, result.text
    request = call_request(raw.received(), "slow")
    assert request is not None
    await wait_for(lambda: cancelled_notices(raw.received()), what="notifications/cancelled")
    assert [n["requestId"] for n in cancelled_notices(raw.received())] == [request["id"]]


async def test_the_time_a_person_takes_on_an_elicitation_does_not_count_against_the_timeout(make_runtime):
    asker = Agent(
        "asker",
        model=echo_model(tool_call(ELICIT, {}, id="e1")),
        mcp_servers=[everything(require_approval={"never": [ELICIT]}, timeout_s=2.0)],
    )
    agent = make_runtime([asker]).get_agent("asker")
    paused = await agent.generate("ask me")
    assert paused.finish_reason == "suspended"
    await asyncio.sleep(3.0)  # the person thinks for longer than the server's timeout_s
    done = await agent.resume_generate(ANSWER, run_id=paused.run_id)
    assert done.finish_reason == "stop"
    assert "Ada Lovelace" in done.text and "timed out" not in done.text


# ---- a call paused on an elicitation, and the run's cancel ----------------------------------------------


def stdin_of(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def answered_cancel(messages: list[dict[str, Any]]) -> bool:
    """Whether the client answered the server's elicitation with ``cancel``."""
    return any(m.get("result", {}).get("action") == "cancel" for m in messages if "method" not in m)


async def ended_at_the_server(log: Path) -> None:
    """The elicitation was answered ``cancel`` and the call it belongs to cancelled at the server."""
    await wait_for(lambda: answered_cancel(stdin_of(log)), what="the elicitation to be answered cancel")
    request = call_request(stdin_of(log), ELICIT)
    assert request is not None
    await wait_for(lambda: cancelled_notices(stdin_of(log)), what="notifications/cancelled")
    assert [n["requestId"] for n in cancelled_notices(stdin_of(log))] == [request["id"]]


def asking(log: Path, name: str = "asker") -> Agent:
    server = recorded(everything(require_approval={"never": [ELICIT]}), log)
    return Agent(name, model=echo_model(tool_call(ELICIT, {}, id="e1")), mcp_servers=[server])


async def waiting_calls(runtime: Any, agent_id: str) -> int | None:
    """How many MCP calls wait on an answer in the agent's host (None on Ray: the host is out of reach)."""
    if runtime.executor != "local":
        return None
    stats = await runtime.handle(agent_id).host.stats()
    return int(stats["mcp_servers"]["everything"]["waiting_for_answers"])


async def test_cancelling_a_run_paused_on_an_elicitation_ends_the_call_on_the_session(make_runtime, tmp_path):
    log = tmp_path / "stdin.jsonl"
    runtime = make_runtime([asking(log)])
    agent = runtime.get_agent("asker")
    paused = await agent.generate("ask me")
    assert paused.finish_reason == "suspended"
    assert await waiting_calls(runtime, "asker") in (1, None)

    await agent.cancel_run(paused.run_id, reason="never mind")
    await ended_at_the_server(log)
    assert await waiting_calls(runtime, "asker") in (0, None)


async def test_a_cancel_from_the_parent_or_from_elsewhere_ends_a_subagents_elicitation(
    make_runtime, tmp_path
):
    """Cancelling the top run cascades to the subagent's host, which ends the call at once; cancelling
    the subagent's run itself is routed through the top run (a decision), and its host ends the call
    when its next heartbeat finds the run cancelled."""
    for how in ("top", "subagent"):
        log = tmp_path / f"stdin-{how}.jsonl"
        boss = Agent(
            f"boss-{how}",
            model=echo_model(tool_call(f"agent-asker-{how}", {"prompt": "ask"}, id="d1")),
            agents={f"asker-{how}": asking(log, f"asker-{how}")},
        )
        runtime = make_runtime([boss])
        top = runtime.get_agent(boss.id)
        paused = await top.generate("go")
        assert paused.finish_reason == "suspended"
        if how == "top":
            await top.cancel_run(paused.run_id, reason="never mind")
        else:
            from troupe.core.run.delegation import child_run_id

            sub = runtime.get_agent(f"asker-{how}")
            await sub.cancel_run(child_run_id(paused.run_id, "d1"), reason="never mind")
        await ended_at_the_server(log)
        assert await waiting_calls(runtime, f"asker-{how}") in (0, None)
