"""An MCP server's elicitation is a suspend() pause: its requested schema is the resume schema, the
answer (accept, decline) reaches the server, the result reaches the model, and a supervisor above sees
the pause bubble up. With the real ``@modelcontextprotocol/server-everything``, on both executors."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import chunks_of, echo_model, types_of
from mcp_servers import everything

from troupe import Agent, SqliteStore
from troupe.errors import ResumeDataValidationError
from troupe.testing import tool_call

ELICIT = "trigger-elicitation-request"
ANSWER = {"name": "Ada Lovelace", "check": True, "email": "ada@example.com", "integer": 7}


def asking_agent(**server: Any) -> Agent:
    return Agent(
        "asker",
        model=echo_model(tool_call(ELICIT, {}, id="e1")),
        mcp_servers=[everything(require_approval={"never": [ELICIT]}, **server)],
    )


async def test_elicitation_pauses_the_run_and_the_answer_reaches_the_server(make_runtime):
    runtime = make_runtime([asking_agent()])
    asker = runtime.get_agent("asker")
    stream = await asker.stream("ask me")
    chunks = await chunks_of(stream)
    assert types_of(chunks)[-1] == "tool-call-suspended"
    pause = chunks[-1].payload
    schema = pause["resume_schema"]
    assert schema["type"] == "object" and "email" in schema["properties"]  # the server's requested schema
    assert pause["suspend_payload"]["mcp_server"] == "everything"
    assert "Please provide inputs" in pause["suspend_payload"]["message"]

    with pytest.raises(ResumeDataValidationError, match="integer"):
        await asker.resume_stream({**ANSWER, "integer": "seven"}, run_id=stream.run_id)

    resumed = await asker.resume_stream(ANSWER, run_id=stream.run_id)
    result = await resumed.result()
    assert result.finish_reason == "stop"
    assert "Ada Lovelace" in result.text and '"action": "accept"' in result.text


async def test_a_declined_elicitation_is_declined_at_the_server(make_runtime):
    runtime = make_runtime([asking_agent()])
    asker = runtime.get_agent("asker")
    stream = await asker.stream("ask me")
    await chunks_of(stream)
    declined = await asker.decline_tool_call(run_id=stream.run_id, reason="not telling")
    result = await declined.result()
    assert result.finish_reason == "stop"
    assert "declined" in result.text.lower()  # the server's own answer to a decline reached the model


async def test_a_supervisor_sees_the_elicitation_bubble_up_and_answers_it(make_runtime):
    asker = asking_agent()
    boss = Agent(
        "boss",
        model=echo_model(tool_call("agent-asker", {"prompt": "ask"}, id="d1")),
        agents={"asker": asker},
    )
    runtime = make_runtime([boss])
    top = runtime.get_agent("boss")
    stream = await top.stream("go")
    chunks = await chunks_of(stream)
    pause = chunks[-1]
    assert pause.type == "tool-call-suspended"
    assert pause.payload["tool_call_id"] == "d1" and pause.payload["agent_path"] == ["boss", "asker"]
    assert pause.payload["tool_name"] == ELICIT and "email" in pause.payload["resume_schema"]["properties"]
    result = await (await top.resume_stream(ANSWER, run_id=stream.run_id)).result()
    assert result.finish_reason == "stop" and "Ada Lovelace" in result.text


async def test_an_answer_after_the_session_is_gone_comes_back_interrupted(executor, tmp_path, make_runtime):
    store = tmp_path / "runs.db"
    first = make_runtime([asking_agent()], storage=SqliteStore(store))
    stream = await first.get_agent("asker").stream("ask me")
    await chunks_of(stream)
    await first.shutdown()  # the host and its session (and the server's process) end; the pause is stored

    second = make_runtime([asking_agent()], storage=SqliteStore(store))
    resumed = await second.get_agent("asker").resume_stream(ANSWER, run_id=stream.run_id)
    chunks = await chunks_of(resumed)
    error = next(c for c in chunks if c.type == "tool-error")
    assert error.payload["interrupted"] is True
    assert "was not run again" in error.payload["result"]["error"]
    assert (await resumed.result()).finish_reason == "stop"


async def test_an_elicitation_nobody_answers_in_time_is_cancelled_at_the_server(make_runtime, tmp_path):
    from clocks import FileClock

    clock = FileClock(tmp_path / "now")
    runtime = make_runtime([asking_agent()], clock=clock)
    asker = runtime.get_agent("asker")
    stream = await asker.stream("ask me", approval_timeout=30)
    await chunks_of(stream)
    clock.advance(31)
    assert await runtime.expire_due() == {"asker": [stream.run_id]}
    result = await (await asker.observe_stream(run_id=stream.run_id)).result()
    assert "User cancelled the elicitation dialog" in result.text  # the server heard "cancel"
