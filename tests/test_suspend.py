"""Suspension: a tool pauses itself with ctx.agent.suspend(payload) and is resumed with data."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import AskCity, chunks_of, delete_tool, echo_model, one_call, types_of, weather_tool
from pydantic import BaseModel

from troupe import Agent, create_tool
from troupe.errors import ResumeDataValidationError, ToolCallNotSuspendedError
from troupe.testing import tool_call


async def test_a_tool_suspends_and_resume_stream_calls_it_again_with_the_data(make_runtime, calls):
    agent = Agent("planner", model=one_call("weather", {}), tools=[weather_tool(calls)])
    make_runtime([agent])

    stream = await agent.stream("weather?")
    chunks = await chunks_of(stream)
    assert types_of(chunks) == ["start", "step-start", "tool-call", "tool-call-suspended"]
    suspended = chunks[3].payload
    assert suspended["suspend_payload"] == {"message": "Which city?"}
    assert suspended["resume_schema"]["properties"]["city"]["type"] == "string"
    assert suspended["tool_call_id"] == "call-1"

    resumed = await agent.resume_stream({"city": "Lisbon"}, run_id=stream.run_id)
    result = await resumed.result()

    assert [e["phase"] for e in calls.entries("weather")] == ["suspend", "resume"]
    assert result.text == 'call-1={"city": "Lisbon", "forecast": "sunny"}'


async def test_invalid_resume_data_leaves_the_run_paused_and_valid_data_then_completes(make_runtime, calls):
    agent = Agent("planner", model=one_call("weather", {}), tools=[weather_tool(calls)])
    make_runtime([agent])
    paused = await agent.generate("weather?")
    assert paused.suspend_payload["suspend_payload"] == {"message": "Which city?"}

    with pytest.raises(ResumeDataValidationError, match="city"):
        await agent.resume_stream({"town": "Porto"}, run_id=paused.run_id)
    still = await agent.list_suspended_runs()
    assert [r.run_id for r in still.runs] == [paused.run_id]
    assert still.runs[0].pending[0].suspend_payload == {"message": "Which city?"}
    assert calls.count() == 1, "nothing ran for the rejected data"

    done = await agent.resume_generate({"city": "Porto"}, run_id=paused.run_id, tool_call_id="call-1")
    assert done.finish_reason == "stop"
    assert "Porto" in done.text


async def test_a_suspend_payload_that_breaks_its_schema_is_a_tool_error(make_runtime, calls):
    class Empty(BaseModel):
        pass

    async def bad(inp, ctx):
        return await ctx.agent.suspend({"wrong": 1})

    tool = create_tool("bad", "bad", Empty, bad, suspend_schema=AskCity)
    agent = Agent("planner", model=one_call("bad", {}), tools=[tool])
    make_runtime([agent])

    result = await agent.generate("go")

    assert result.finish_reason == "stop"
    assert "suspend payload does not match suspend_schema" in result.text


async def test_approve_and_resume_only_fit_their_own_kind_of_pause(make_runtime, calls):
    model = echo_model(tool_call("weather", {}, id="w"), tool_call("delete_record", {"id": "a"}, id="d"))
    agent = Agent("planner", model=model, tools=[weather_tool(calls), delete_tool(calls)])
    make_runtime([agent])
    paused = await agent.generate("go")

    with pytest.raises(ToolCallNotSuspendedError, match="resume data"):
        await agent.approve_tool_call(run_id=paused.run_id, tool_call_id="w")
    # An approval pause takes resume data only in its own schema, {approved, reason?}.
    with pytest.raises(ResumeDataValidationError, match="approved: Field required"):
        await agent.resume_stream({"city": "x"}, run_id=paused.run_id, tool_call_id="d")

    await agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="d")
    done = await agent.resume_generate({"city": "Oslo"}, run_id=paused.run_id, tool_call_id="w")
    assert done.text == 'w={"city": "Oslo", "forecast": "sunny"} | d={"deleted": "a"}'


async def test_declining_a_suspended_call_tells_the_model_and_never_resumes_the_tool(make_runtime, calls):
    agent = Agent("planner", model=one_call("weather", {}), tools=[weather_tool(calls)])
    make_runtime([agent])
    paused = await agent.generate("weather?")

    done = await agent.decline_tool_call_generate(run_id=paused.run_id, reason="never mind")

    assert done.text == "call-1=never mind"
    assert [e["phase"] for e in calls.entries("weather")] == ["suspend"]


async def test_a_tool_may_suspend_again_on_resume(make_runtime, calls):
    class Empty(BaseModel):
        pass

    class Answer(BaseModel):
        value: int

    async def until_positive(inp, ctx):
        data = ctx.agent.resume_data
        if data is None or data.value <= 0:
            return await ctx.agent.suspend({"message": "a positive number, please"})
        return data.value

    tool = create_tool("ask", "ask", Empty, until_positive, suspend_schema=AskCity, resume_schema=Answer)
    agent = Agent("planner", model=one_call("ask", {}), tools=[tool])
    make_runtime([agent])
    paused = await agent.generate("go")

    again = await agent.resume_generate({"value": -1}, run_id=paused.run_id)
    assert again.finish_reason == "suspended"
    assert again.suspend_payload["suspend_payload"] == {"message": "a positive number, please"}
    done = await agent.resume_generate({"value": 7}, run_id=paused.run_id)
    assert done.text == "call-1=7"


def nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"a": value}
    return value


class Nothing(BaseModel):
    pass


@pytest.mark.parametrize(
    ("data", "problem"),
    [(nested(200), "nested deeper than 64 levels"), (object(), "holds a object, which is not JSON")],
    ids=["nested-200-deep", "a-python-object"],
)
async def test_resume_data_that_cannot_be_stored_is_refused_before_anything_is_claimed(
    make_runtime, calls, data: Any, problem: str
):
    """A tool without a resume_schema takes any answer, but the answer is stored with the run and in its
    audit log: one nested deeper than a model's output may be (it would be written, then fail every read
    of the run and its audit), or one that is not JSON, is refused as invalid resume data. Nothing is
    claimed: the run stays paused and a good answer completes it."""

    async def ask(inp: Nothing, ctx: Any) -> Any:
        if ctx.agent.resume_data is None:
            return await ctx.agent.suspend({"q": "what?"})
        calls.record("ask", answer=ctx.agent.resume_data)
        return {"got": ctx.agent.resume_data}

    agent = Agent("planner", model=one_call("ask", {}), tools=[create_tool("ask", "Ask", Nothing, ask)])
    runtime = make_runtime([agent])
    paused = await agent.generate("ask me")

    with pytest.raises(ResumeDataValidationError, match="cannot be stored") as refused:
        await agent.resume_generate(data, run_id=paused.run_id)

    assert problem in refused.value.message and "'ask'" in refused.value.message
    assert await runtime.store().list_audit(paused.run_id) == [], "the refused answer was claimed"
    assert [r.run_id for r in (await agent.list_suspended_runs()).runs] == [paused.run_id]
    done = await agent.resume_generate({"ok": 1}, run_id=paused.run_id)
    assert done.text == 'call-1={"got": {"ok": 1}}'
    assert calls.entries("ask") == [{"name": "ask", "answer": {"ok": 1}}]
    assert [e.kind for e in await runtime.store().list_audit(paused.run_id)] == ["resumed"]
