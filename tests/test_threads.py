"""Threads: memory across runs, finding paused runs from storage, auto-resume from the next message."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import delete_tool, echo_model, one_call, weather_tool

from troupe import Agent, Memory
from troupe.errors import AmbiguousSuspendedRunsError, InvalidPaginationError, NoSuspendedRunError
from troupe.testing import FunctionModel, text, tool_call


def remembering_model() -> FunctionModel:
    """Answers with the user messages it can see, so a test reads what history a run was given."""

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return text(" / ".join(m["content"] for m in messages if m["role"] == "user"))

    return FunctionModel(turn)


async def test_a_run_on_a_thread_sees_the_threads_earlier_messages(make_runtime):
    agent = Agent("chat", model=remembering_model(), memory=Memory())
    runtime = make_runtime([agent])

    first = await agent.generate("my name is Ada", thread_id="t1", resource_id="u1")
    second = await agent.generate("what is my name?", thread_id="t1", resource_id="u1")
    elsewhere = await agent.generate("hello", thread_id="t2", resource_id="u1")

    assert first.text == "my name is Ada"
    assert second.text == "my name is Ada / what is my name?"
    assert elsewhere.text == "hello"
    stored = await runtime.store().load_messages("t1")
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant"]


async def test_without_memory_runs_do_not_share_a_thread(make_runtime):
    agent = Agent("chat", model=remembering_model())
    make_runtime([agent])

    await agent.generate("first", thread_id="t1")
    assert (await agent.generate("second", thread_id="t1")).text == "second"


async def test_last_messages_caps_history_without_cutting_a_tool_exchange(make_runtime, calls):
    model = echo_model(tool_call("pay", {"to": "a", "amount": 1}, id="p1"))
    from helpers import pay_tool

    agent = Agent("chat", model=model, tools=[pay_tool(calls)], memory=Memory(last_messages=3))
    runtime = make_runtime([agent])
    await agent.generate("pay a", thread_id="t")
    other = Agent(
        "peek",
        model=FunctionModel(lambda messages, tools: text(",".join(m["role"] for m in messages))),
        memory=Memory(last_messages=3),
    )
    runtime.register(other)
    result = await other.generate("next", thread_id="t")
    # The thread holds user, assistant(tool call), tool, assistant: the last 3 would start at the tool
    # result, cut off from its call, so the history starts at the next user message: none here.
    assert result.text == "user"


async def test_a_paused_runs_conversation_so_far_is_in_its_thread(make_runtime, calls):
    agent = Agent(
        "ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)], memory=Memory()
    )
    runtime = make_runtime([agent])

    await agent.generate("delete a", thread_id="t1")

    # Only complete turns: the assistant's pending tool call is not saved until it has its result.
    assert [m["role"] for m in await runtime.store().load_messages("t1")] == ["user"]


async def test_send_tool_approval_finds_the_run_on_the_thread(make_runtime, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    make_runtime([agent])
    await agent.generate("delete a", thread_id="t1", resource_id="u1")

    with pytest.raises(NoSuspendedRunError):
        await agent.send_tool_approval(thread_id="t2", resource_id="u1", approved=True)
    stream = await agent.send_tool_approval(thread_id="t1", resource_id="u1", approved=True)
    result = await stream.result()

    assert result.text == 'call-1={"deleted": "a"}'
    assert calls.count() == 1


async def test_send_tool_approval_is_ambiguous_with_two_paused_runs_unless_a_call_is_named(
    make_runtime, calls
):
    model = FunctionModel(
        lambda messages, tools: (
            text("done")
            if messages[-1]["role"] == "tool"
            else tool_call(
                "delete_record", {"id": messages[-1]["content"]}, id=f"c-{messages[-1]['content']}"
            )
        )
    )
    agent = Agent("ops", model=model, tools=[delete_tool(calls)])
    make_runtime([agent])
    await agent.generate("x", thread_id="t1", resource_id="u1")
    await agent.generate("y", thread_id="t1", resource_id="u1")

    with pytest.raises(AmbiguousSuspendedRunsError, match="2 runs"):
        await agent.send_tool_approval(thread_id="t1", resource_id="u1", approved=False)
    declined = await agent.send_tool_approval(
        thread_id="t1", resource_id="u1", approved=False, tool_call_id="c-y", reason="no"
    )
    assert (await declined.result()).finish_reason == "stop"
    assert calls.count() == 0
    left = await agent.list_suspended_runs(thread_id="t1")
    assert [p.tool_call_id for r in left.runs for p in r.pending] == ["c-x"]


async def test_listing_is_scoped_to_the_agent_and_paged_with_a_total(make_runtime, calls):
    ops = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    other = Agent("other", model=one_call("delete_record", {"id": "b"}), tools=[delete_tool(calls)])
    make_runtime([ops, other])
    for i in range(5):
        await ops.generate("delete", thread_id=f"t{i % 2}", resource_id="u1")
    await other.generate("delete", thread_id="t0", resource_id="u1")

    everything = await ops.list_suspended_runs()
    page = await ops.list_suspended_runs(page=1, per_page=2)
    thread = await ops.list_suspended_runs(thread_id="t0")

    assert everything.total == 5 and len(everything.runs) == 5
    assert page.total == 5 and [r.run_id for r in page.runs] == [r.run_id for r in everything.runs[2:4]]
    assert thread.total == 3
    assert {r.agent_id for r in everything.runs} == {"ops"}
    first = everything.runs[0].pending[0]
    assert (first.tool_name, first.args, first.requires_approval) == ("delete_record", {"id": "a"}, True)
    with pytest.raises(InvalidPaginationError):
        await ops.list_suspended_runs(page=-1, per_page=2)


def auto_resume_model() -> FunctionModel:
    """Calls the weather tool once; answers extraction requests by reading a city from the message; then
    reports the tool result."""

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[0]["role"] == "system" and messages[0]["content"].startswith("Extract"):
            said = messages[-1]["content"]
            if said.startswith("approve"):
                return text(json.dumps({"approved": True}))  # a model trying to approve: must have no effect
            return text(json.dumps({"city": said.removeprefix("It is ").strip(".")}))
        last = messages[-1]
        if last["role"] == "tool":
            return text(f"result: {last['content']}")
        if last["content"] == "delete it":
            return tool_call("delete_record", {"id": "z"}, id="d1")
        return tool_call("weather", {}, id="w1")

    return FunctionModel(turn)


async def test_the_next_message_on_the_thread_answers_a_suspended_tool(make_runtime, calls):
    agent = Agent(
        "planner",
        model=auto_resume_model(),
        tools=[weather_tool(calls)],
        memory=Memory(),
        default_options={"auto_resume_suspended_tools": True},
    )
    runtime = make_runtime([agent])

    paused = await agent.generate("what's the weather?", thread_id="t1", resource_id="u1")
    assert paused.suspend_payload["suspend_payload"] == {"message": "Which city?"}
    resumed = await agent.generate("It is Lisbon.", thread_id="t1", resource_id="u1")

    assert resumed.run_id == paused.run_id, "the message resumed the paused run"
    assert resumed.text == 'result: {"city": "Lisbon", "forecast": "sunny"}'
    assert [e["phase"] for e in calls.entries("weather")] == ["suspend", "resume"]
    [entry] = await runtime.store().list_audit(paused.run_id)
    assert (entry.kind, entry.decided_by, entry.resume_data) == ("resumed", "auto-resume", {"city": "Lisbon"})
    thread = [m["content"] for m in await runtime.store().load_messages("t1") if m["role"] == "user"]
    assert thread == ["what's the weather?", "It is Lisbon."]


async def test_a_model_can_never_approve_a_tool_call(make_runtime, calls):
    agent = Agent(
        "planner",
        model=auto_resume_model(),
        tools=[delete_tool(calls)],
        memory=Memory(),
        default_options={"auto_resume_suspended_tools": True},
    )
    make_runtime([agent])

    paused = await agent.generate("delete it", thread_id="t1")
    assert paused.suspend_payload["tool_name"] == "delete_record"
    reply = await agent.generate("approve please, yes, approved", thread_id="t1")

    assert reply.run_id != paused.run_id
    assert calls.count() == 0
    still = await agent.list_suspended_runs(thread_id="t1")
    assert paused.run_id in [r.run_id for r in still.runs]


async def test_a_thread_of_one_resource_is_closed_to_runs_of_another(make_runtime):
    from troupe.errors import ThreadAccessError

    agent = Agent("chat", model=remembering_model(), memory=Memory())
    make_runtime([agent])
    await agent.generate("my secret is 42", thread_id="t1", resource_id="alice")

    with pytest.raises(ThreadAccessError, match="another resource"):
        await agent.generate("what is the secret?", thread_id="t1", resource_id="mallory")
    with pytest.raises(ThreadAccessError):
        await agent.generate("and now?", thread_id="t1")
    assert (await agent.generate("again", thread_id="t1", resource_id="alice")).text.startswith("my secret")
