"""One approval story, three ways of reaching the agent: in-process (``troupe.Agent``), over HTTP with the
async client, and over HTTP with the blocking one. The same test body runs against each, through the
``AgentAPI`` protocol they share (mypy checks each conforms: ``troupe.api.conformance``)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from http_server import KEYS, runtime_factory
from troupe.core.vocabulary.agent_api import AgentAPI

from troupe import Chunk
from troupe.client import AsyncTroupeClient, TroupeClient
from troupe.errors import RunCancelledError
from troupe.testing import CallLog

AnyAgent = AgentAPI[Any, Any, Any, Any]


async def settled(value: Any) -> Any:
    """What a call handed back: awaited (in-process, async client) or as it is (blocking client)."""
    return await value if inspect.isawaitable(value) else value


async def chunks_of(stream: Any) -> list[Chunk]:
    chunks = stream.full_stream
    if hasattr(chunks, "__aiter__"):
        return [c async for c in chunks]
    return list(chunks)


@pytest.fixture(params=["in-process", "http-async", "http-sync"])
async def agents(
    request: pytest.FixtureRequest, tmp_path: Any, calls: CallLog, http_server: Any
) -> AsyncIterator[Callable[[str], AnyAgent]]:
    build = runtime_factory(tmp_path, calls)  # "ops" deletes records (approval), "planner" asks a city
    if request.param == "in-process":
        runtime = build()
        yield runtime.get_agent
        await runtime.shutdown()
        return
    server = http_server(build, keys=KEYS)
    if request.param == "http-async":
        async with AsyncTroupeClient(server.url, api_key="key-a") as client:
            yield client.get_agent
        return
    with TroupeClient(server.url, api_key="key-a") as blocking:
        yield blocking.get_agent


async def test_the_approval_story(agents: Callable[[str], AnyAgent], calls: CallLog):
    ops = agents("ops")

    # Start: the run pauses on the gated call, announced with what the human decides on.
    stream = await settled(ops.stream("delete abc-123", resource_id="a1"))
    [approval] = [c for c in await chunks_of(stream) if c.type == "tool-call-approval"]
    assert approval.payload["tool_call_id"] == "call-1" and approval.payload["args"] == {"id": "abc-123"}
    paused = await settled(stream.result())
    assert paused.finish_reason == "suspended" and calls.count("delete_record") == 0

    # Approve: the tool runs once and the run finishes.
    approved = await settled(
        ops.approve_tool_call(
            run_id=stream.run_id, tool_call_id="call-1", fingerprint=approval.payload["fingerprint"]
        )
    )
    done = await settled(approved.result())
    assert (done.finish_reason, done.text) == ("stop", 'call-1={"deleted": "abc-123"}')
    assert calls.count("delete_record") == 1

    # Decline with a reason: the tool never runs, the model is told why.
    second = await settled(ops.generate("delete abc-123", resource_id="a1"))
    listed = await settled(ops.list_suspended_runs())
    assert [r.run_id for r in listed.runs] == [second.run_id]
    declined = await settled(
        ops.decline_tool_call_generate(run_id=second.run_id, tool_call_id="call-1", reason="not today")
    )
    assert (declined.finish_reason, declined.text) == ("stop", "call-1=not today")
    assert calls.count("delete_record") == 1

    # Resume with data: the tool that asked is called again with the answer.
    planner = agents("planner")
    asked = await settled(planner.generate("weather please", resource_id="a1"))
    assert asked.finish_reason == "suspended"
    assert asked.suspend_payload["suspend_payload"] == {"message": "Which city?"}
    answered = await settled(
        planner.resume_generate({"city": "Paris"}, run_id=asked.run_id, tool_call_id="w1")
    )
    assert answered.text == 'w1={"city": "Paris", "forecast": "sunny"}'
    assert [e["phase"] for e in calls.entries("weather")] == ["suspend", "resume"]

    # Cancel: the paused run ends, its pause withdrawn; deciding it afterwards is a conflict.
    third = await settled(ops.generate("delete abc-123", resource_id="a1"))
    cancelled = await settled(ops.cancel_run(third.run_id, reason="not needed"))
    assert (cancelled.run_id, cancelled.reason, cancelled.was) == (third.run_id, "not needed", "suspended")
    assert [r.run_id for r in (await settled(ops.list_suspended_runs())).runs] == []
    with pytest.raises(RunCancelledError):
        await settled(ops.approve_tool_call_generate(run_id=third.run_id, tool_call_id="call-1"))
    assert calls.count("delete_record") == 1
