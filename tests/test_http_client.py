"""``troupe.client`` end to end against a live server: the Python API's agent methods over HTTP, async and
blocking, with errors raised as the matching ``troupe.errors`` classes."""

from __future__ import annotations

import pytest
from http_server import KEYS, runtime_factory

from troupe import Chunk, RunResult
from troupe.client import AsyncTroupeClient, AuthenticationError, PermissionDeniedError, TroupeClient
from troupe.errors import (
    AgentNotFoundError,
    ResumeDataValidationError,
    SnapshotNotFoundError,
    ToolCallNotSuspendedError,
)


@pytest.fixture
def server(http_server, tmp_path, calls):
    return http_server(runtime_factory(tmp_path, calls), keys=KEYS)


async def test_async_stream_until_approval_then_approve_and_read_the_final_text(server, calls):
    async with AsyncTroupeClient(server.url, api_key="key-a") as client:
        agent = client.get_agent("ops")
        stream = await agent.stream("delete abc-123", resource_id="a1", thread_id="t1")
        approval = None
        async for chunk in stream.full_stream:
            assert isinstance(chunk, Chunk) and chunk.run_id == stream.run_id
            if chunk.type == "tool-call-approval":
                approval = chunk
        assert approval is not None and approval.payload["tool_call_id"] == "call-1"
        assert approval.payload["agent_path"] == ["ops"], "payloads are snake_case again"
        paused = await stream.result()
        assert paused.suspended and paused.suspend_payload["args"] == {"id": "abc-123"}

        approved = await agent.approve_tool_call(run_id=stream.run_id, tool_call_id="call-1")
        text = "".join([piece async for piece in approved.text_stream])
        assert text == 'call-1={"deleted": "abc-123"}'
        result = await approved.result()
        assert isinstance(result, RunResult) and result.finish_reason == "stop"
        assert result.tool_results[0]["result"] == {"deleted": "abc-123"}
    assert calls.count("delete_record") == 1


def test_a_decision_without_its_call_id_decides_the_latest_paused_call_as_in_process(server, calls):
    """The Python API lets a decision omit ``tool_call_id`` (the run's latest paused call): so do both
    HTTP clients, for every decision method."""
    with TroupeClient(server.url, api_key="key-a") as client:
        agent = client.get_agent("ops")
        paused = agent.generate("delete it", resource_id="a1")
        assert agent.approve_tool_call_generate(run_id=paused.run_id).finish_reason == "stop"
        paused = agent.generate("delete it", resource_id="a1")
        declined = agent.decline_tool_call_generate(run_id=paused.run_id, reason="not now")
        assert declined.text == "call-1=not now"
        paused = agent.generate("delete it", resource_id="a1")
        assert agent.approve_tool_call(run_id=paused.run_id).result().finish_reason == "stop"
        paused = agent.generate("delete it", resource_id="a1")
        assert agent.decline_tool_call(run_id=paused.run_id).result().text.startswith("call-1=")
    assert calls.count("delete_record") == 2


async def test_async_generate_decline_list_and_send_tool_approval(server, calls):
    async with AsyncTroupeClient(server.url, api_key="key-a") as client:
        agent = client.get_agent("ops")
        paused = await agent.generate("delete it", resource_id="a1", thread_id="t1")
        assert paused.finish_reason == "suspended" and paused.suspend_payload["tool_call_id"] == "call-1"
        declined = await agent.decline_tool_call_generate(
            run_id=paused.run_id, tool_call_id="call-1", reason="not now"
        )
        assert declined.text == "call-1=not now"

        first = await agent.generate("delete it", resource_id="a1", thread_id="t2")
        second = await agent.generate("delete it", resource_id="a2", thread_id="t3")
        listed = await agent.list_suspended_runs()
        assert [r.run_id for r in listed.runs] == [second.run_id, first.run_id] and listed.total == 2
        assert listed.runs[0].pending[0].tool_name == "delete_record"
        assert listed.runs[0].tool_calls == listed.runs[0].pending and listed.runs[0].status == "suspended"
        assert listed.runs[0].suspended_at is not None
        assert (await agent.list_suspended_runs(resource_id="a1", per_page=1, page=0)).runs[
            0
        ].run_id == first.run_id
        with pytest.raises(PermissionDeniedError, match="no memory"):  # as Mastra: no threads to own
            await agent.list_suspended_runs(thread_id="t2")

        stream = await agent.send_tool_approval(thread_id="t2", resource_id="a1", approved=True)
        assert stream.run_id == first.run_id
        assert (await stream.result()).text == 'call-1={"deleted": "abc-123"}'
        declined_stream = await agent.decline_tool_call(run_id=second.run_id, tool_call_id="call-1")
        assert (await declined_stream.result()).text == "call-1=Tool call was not approved by the user"

        planner = client.get_agent("planner")
        asked = await planner.generate("weather?", resource_id="a1")
        with pytest.raises(ResumeDataValidationError):
            await planner.resume_stream({"town": "x"}, run_id=asked.run_id)
        done = await planner.resume_generate({"city": "Rome"}, run_id=asked.run_id, tool_call_id="w1")
        assert done.text == 'w1={"city": "Rome", "forecast": "sunny"}'
    assert calls.count("delete_record") == 1


async def test_http_errors_come_back_as_troupe_errors(server):
    async with (
        AsyncTroupeClient(server.url, api_key="key-a") as a,
        AsyncTroupeClient(server.url) as anonymous,
    ):
        paused = await a.get_agent("ops").generate("x", resource_id="a1")
        with pytest.raises(ToolCallNotSuspendedError):
            await a.get_agent("ops").approve_tool_call(run_id=paused.run_id, tool_call_id="other")
        with pytest.raises(SnapshotNotFoundError):
            await a.get_agent("ops").approve_tool_call_generate(run_id="nope", tool_call_id="call-1")
        with pytest.raises(AgentNotFoundError):
            await a.get_agent("nobody").details()
        with pytest.raises(AuthenticationError):
            await anonymous.list_agents()
        async with AsyncTroupeClient(server.url, api_key="key-b") as b:
            with pytest.raises(SnapshotNotFoundError):  # someone else's run, answered as an unknown one
                await b.get_agent("ops").decline_tool_call(run_id=paused.run_id, tool_call_id="call-1")
            with pytest.raises(PermissionDeniedError):
                await b.get_agent("ops").generate("delete", resource_id="a1")
        assert (await a.get_agent("ops").details())["tools"]["delete_record"]["requireApproval"] is True


def test_the_blocking_client_does_the_same(server, calls):
    with TroupeClient(server.url, api_key="key-a") as client:
        assert set(client.list_agents()) == {"ops", "planner"}
        agent = client.get_agent("ops")
        stream = agent.stream("delete abc-123", resource_id="a1")
        kinds = [chunk.type for chunk in stream.full_stream]
        assert kinds[-1] == "tool-call-approval", "a paused stream ends at its pause"
        approved = agent.approve_tool_call(run_id=stream.run_id, tool_call_id="call-1")
        assert "".join(approved.text_stream) == 'call-1={"deleted": "abc-123"}'
        assert approved.result().finish_reason == "stop"

        paused = agent.generate("again", resource_id="a2", thread_id="tt")
        assert agent.list_suspended_runs(resource_id="a2").total == 1
        done = agent.send_tool_approval(thread_id="tt", resource_id="a2", approved=False, reason="no")
        assert done.run_id == paused.run_id and done.result().text == "call-1=no"
        with pytest.raises(SnapshotNotFoundError):
            agent.resume_generate({"city": "x"}, run_id="gone")
    assert calls.count("delete_record") == 1


@pytest.mark.ray
def test_the_client_against_a_server_on_ray(http_server, tmp_path, calls, ray_session):
    server = http_server(runtime_factory(tmp_path, calls, executor="ray"), keys=KEYS)
    with TroupeClient(server.url, api_key="key-admin") as client:
        agent = client.get_agent("ops")
        stream = agent.stream("delete abc-123")
        assert [c.type for c in stream.full_stream][-1] == "tool-call-approval"
        approved = agent.approve_tool_call(run_id=stream.run_id, tool_call_id="call-1")
        assert approved.result().text == 'call-1={"deleted": "abc-123"}'
        paused = agent.generate("again")
        declined = agent.decline_tool_call_generate(run_id=paused.run_id, tool_call_id="call-1", reason="r")
        assert declined.text == "call-1=r"
    assert calls.count("delete_record") == 1
