"""The agent loop without humans: streaming, tool results and errors, parallel calls, step limits."""

from __future__ import annotations

import time

import pytest
from helpers import chunks_of, echo_model, one_call, pay_tool, script_used_up, types_of
from pydantic import BaseModel

from troupe import Agent, create_tool
from troupe.errors import DuplicateRunError, InvalidOptionError, ModelError
from troupe.testing import FunctionModel, ScriptedModel, text, tool_call


async def test_a_text_answer_streams_in_order_and_leaves_no_snapshot(make_runtime, executor):
    model = ScriptedModel([text("Hello there, human.")])
    agent = Agent("chat", model=model)
    runtime = make_runtime([agent])

    stream = await agent.stream("hi")
    chunks = await chunks_of(stream)

    assert types_of(chunks) == [
        "start",
        "step-start",
        "text-start",
        "text-delta",
        "text-delta",
        "text-delta",
        "text-end",
        "step-finish",
        "finish",
    ]
    # One text part: every delta and its start and end carry the part's id.
    assert len({c.payload["id"] for c in chunks[2:7]}) == 1
    assert {c.run_id for c in chunks} == {stream.run_id}
    assert [t async for t in stream.text_stream] == ["Hello ", "there, ", "human."]
    result = await stream.result()
    assert result.text == "Hello there, human."
    assert result.finish_reason == "stop"
    assert await runtime.store().load_run(stream.run_id) is None
    script_used_up(model, executor)


async def test_full_stream_and_text_stream_can_each_be_read_alone(make_runtime, executor):
    model = ScriptedModel([text("one two"), text("three")])
    agent = Agent("chat", model=model)
    make_runtime([agent])

    first = await agent.stream("a")
    assert "".join([t async for t in first.text_stream]) == "one two"
    second = await agent.stream("b")
    assert [c.type async for c in second.full_stream][-1] == "finish"
    assert (await second.result()).text == "three"
    script_used_up(model, executor)


async def test_tool_results_go_back_to_the_model_and_the_loop_continues(make_runtime, calls):
    agent = Agent("ops", model=one_call("pay", {"to": "ann", "amount": 3}), tools=[pay_tool(calls)])
    make_runtime([agent])

    result = await agent.generate("pay ann")

    assert result.finish_reason == "stop"
    assert [s.finish_reason for s in result.steps] == ["tool-calls", "stop"]
    assert result.tool_calls == [
        {"tool_call_id": "call-1", "tool_name": "pay", "args": {"to": "ann", "amount": 3}}
    ]
    assert result.text == 'call-1={"paid": 3, "to": "ann"}'


async def test_a_tool_that_raises_becomes_a_tool_error_the_model_sees(make_runtime):
    class In(BaseModel):
        x: int

    def explode(inp, ctx):
        raise ValueError(f"cannot handle {inp.x}")

    agent = Agent(
        "ops", model=one_call("explode", {"x": 4}), tools=[create_tool("explode", "e", In, explode)]
    )
    make_runtime([agent])

    stream = await agent.stream("go")
    chunks = await chunks_of(stream)

    error = next(c for c in chunks if c.type == "tool-error")
    assert error.payload["result"] == {"error": "ValueError: cannot handle 4"}
    assert (await stream.result()).text == 'call-1={"error": "ValueError: cannot handle 4"}'


@pytest.mark.parametrize("timeout_s", [None, 30.0], ids=["no-timeout", "own-timeout-not-reached"])
async def test_a_tool_raising_its_own_timeout_error_is_a_tool_error_beside_its_sibling(
    make_runtime, calls, timeout_s
):
    """A TimeoutError from inside the tool (a socket read, its own wait_for) is not its timeout_s
    running out: the model hears it like any error, the other call of the step still counts."""

    class In(BaseModel):
        q: str

    def flaky(inp, ctx):
        raise TimeoutError("upstream read timed out")

    tools = [create_tool("flaky", "f", In, flaky, timeout_s=timeout_s), pay_tool(calls)]
    model = echo_model(
        tool_call("flaky", {"q": "x"}, id="c1"), tool_call("pay", {"to": "ann", "amount": 2}, id="c2")
    )
    agent = Agent("ops", model=model, tools=tools)
    make_runtime([agent])

    result = await agent.generate("go")

    assert result.finish_reason == "stop"
    assert result.text == (
        'c1={"error": "TimeoutError: upstream read timed out"} | c2={"paid": 2, "to": "ann"}'
    )
    assert calls.count("pay") == 1


async def test_unknown_tools_and_invalid_args_are_reported_to_the_model(make_runtime, calls):
    model = echo_model(tool_call("nope", {}, id="c1"), tool_call("pay", {"to": "x"}, id="c2"))
    agent = Agent("ops", model=model, tools=[pay_tool(calls)])
    make_runtime([agent])

    result = await agent.generate("go")

    assert "unknown tool 'nope'" in result.text
    assert "invalid arguments for tool 'pay'" in result.text and "amount" in result.text
    assert calls.count() == 0


async def test_ungated_calls_of_one_step_run_concurrently(make_runtime, calls):
    class In(BaseModel):
        name: str
        partner: str

    async def rendezvous(inp, ctx):
        """Waits until the partner call has started too: only possible if both run at the same time."""
        import asyncio

        calls.record("started", who=inp.name)
        deadline = time.monotonic() + 20
        while not any(e["who"] == inp.partner for e in calls.entries("started")):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{inp.partner} never started while {inp.name} was running")
            await asyncio.sleep(0.01)
        return f"{inp.name} met {inp.partner}"

    tool = create_tool("meet", "meet", In, rendezvous)
    model = echo_model(
        tool_call("meet", {"name": "a", "partner": "b"}, id="a"),
        tool_call("meet", {"name": "b", "partner": "a"}, id="b"),
    )
    agent = Agent("ops", model=model, tools=[tool])
    make_runtime([agent])

    result = await agent.generate("meet")

    assert result.text == "a=a met b | b=b met a"


async def test_the_loop_stops_at_max_steps(make_runtime, calls):
    forever = FunctionModel(lambda messages, tools: tool_call("pay", {"to": "x", "amount": 1}))
    agent = Agent("ops", model=forever, tools=[pay_tool(calls)])
    make_runtime([agent])

    result = await agent.generate("loop", max_steps=3)

    assert result.finish_reason == "max-steps"
    assert len(result.steps) == 3
    assert calls.count("pay") == 3


async def test_a_failing_model_ends_the_run_with_an_error_that_generate_raises(make_runtime):
    agent = Agent("chat", model=ScriptedModel([]))
    runtime = make_runtime([agent])

    stream = await agent.stream("hi", run_id="doomed")
    chunks = await chunks_of(stream)
    assert types_of(chunks)[-2:] == ["error", "finish"]
    assert chunks[-2].payload["error"]["code"] == "MODEL_ERROR"
    assert chunks[-1].payload["finish_reason"] == "error"
    with pytest.raises(ModelError, match="ScriptedModel called 1 times"):
        await stream.result()
    with pytest.raises(ModelError):
        await agent.generate("again")
    assert await runtime.store().load_run("doomed") is None


async def test_messages_may_be_a_list_and_bad_input_is_refused_clearly(make_runtime):
    seen = []

    def answer(messages, tools):
        seen.append([m["role"] for m in messages])
        return text("ok")

    agent = Agent("chat", instructions="Be brief.", model=FunctionModel(answer))
    make_runtime([agent])

    result = await agent.generate(
        [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
        ]
    )
    assert result.text == "ok"
    with pytest.raises(InvalidOptionError, match="messages"):
        await agent.generate([{"content": "no role"}])
    with pytest.raises(InvalidOptionError, match="max_steps"):
        await agent.generate("x", max_steps=0)
    with pytest.raises(InvalidOptionError, match="unknown option"):
        Agent("bad", model=FunctionModel(answer), default_options={"max_step": 3})


async def test_a_run_id_can_be_chosen_but_not_reused_while_the_run_lives(make_runtime, calls):
    agent = Agent("ops", model=one_call("pay", {"to": "x", "amount": 1}), tools=[pay_tool(calls)])
    make_runtime([agent])

    paused = await agent.generate("go", run_id="my-run", require_tool_approval=True)
    assert paused.run_id == "my-run"
    with pytest.raises(DuplicateRunError):
        await agent.generate("go", run_id="my-run")


async def test_text_before_a_tool_call_is_its_own_closed_part(make_runtime, executor):
    """Mastra's shape: each stretch of text is wrapped in text-start/text-end, closed before a tool call."""

    class Empty(BaseModel):
        pass

    model = ScriptedModel(
        [[text("Let me look."), tool_call("lookup", {}, id="c1"), text("Done.")], text("Ok.")]
    )
    agent = Agent("chat", model=model, tools=[create_tool("lookup", "look", Empty, lambda inp, ctx: "found")])
    make_runtime([agent])
    kinds = types_of(await chunks_of(await agent.stream("hi")))
    first_step = kinds[: kinds.index("step-finish")]
    assert first_step == [
        "start",
        "step-start",
        "text-start",
        *["text-delta"] * 3,
        "text-end",
        "tool-call",
        "text-start",
        "text-delta",
        "text-end",
        "tool-result",
    ]
    script_used_up(model, executor)  # the step's tool result went back and the model answered "Ok."
