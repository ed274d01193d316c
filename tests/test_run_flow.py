"""The run's flow as values: every operation ends as one tagged outcome (finished, paused or failed),
and a pause from a subagent reaches the top as a typed ``PauseEvent`` (its deadline a datetime, its path
a tuple) that the pause chunk's payload is written from, across Ray actors too."""

from __future__ import annotations

from datetime import datetime, timedelta

from clocks import FileClock
from helpers import chunks_of, delete_tool, echo_model, one_call
from trees import delegating
from troupe.core.chunks import PauseEvent
from troupe.core.engine import RunEngine
from troupe.core.errors import ModelError
from troupe.core.flow import Failed, Finished, Paused
from troupe.core.requests import Approve, DecideRequest, StartRequest

from troupe import Agent, Chunk, SqliteStore
from troupe.testing import FunctionModel, tool_call


async def test_each_operation_ends_as_one_tagged_outcome(tmp_path, calls):
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    engine = RunEngine(agent, SqliteStore(tmp_path / "t.db"))
    chunks: list[Chunk] = []

    start = await engine.begin_start(StartRequest("delete a"))
    await start.execute(chunks.append)
    assert isinstance(start.outcome, Paused)
    [event] = start.outcome.pauses
    assert (event.tool_call_id, event.tool_name, event.args) == ("call-1", "delete_record", {"id": "a"})
    assert chunks[-1].pause == event, "the outcome's pause is the one announced"

    decision = await engine.begin_decision(DecideRequest(start.run_id, Approve(), "call-1"))
    await decision.execute(chunks.append)
    assert decision.outcome == Finished("stop")
    assert calls.count("delete_record") == 1

    def broken(messages, tools):
        raise RuntimeError("model server down")

    failing = RunEngine(Agent("flaky", model=FunctionModel(broken)), SqliteStore(tmp_path / "f.db"))
    operation = await failing.begin_start(StartRequest("hello"))
    ended: list[Chunk] = []
    await operation.execute(ended.append)
    assert isinstance(operation.outcome, Failed) and isinstance(operation.outcome.error, ModelError)
    assert [c.type for c in ended[-2:]] == ["error", "finish"]


async def test_a_subagents_pause_reaches_the_top_as_a_typed_event_with_its_deadline(
    make_runtime, calls, tmp_path
):
    clock = FileClock(tmp_path / "now")
    # The deadline is set below; the levels above set none of their own.
    data = Agent(
        "data",
        model=echo_model(tool_call("delete_record", {"id": "u1"}, id="leaf-1")),
        tools=[delete_tool(calls)],
        default_options={"approval_timeout": 30},
    )
    mid = Agent("mid", model=delegating("mid", ("data", "delete u1", "m1")), agents={"data": data})
    top = Agent("top", model=delegating("top", ("mid", "clean up", "t1")), agents={"mid": mid})
    make_runtime([top], clock=clock)

    stream = await top.stream("tidy up")
    approval = next(c for c in await chunks_of(stream) if c.type == "tool-call-approval")

    event = approval.pause
    assert isinstance(event, PauseEvent)
    assert isinstance(event.expires_at, datetime)
    assert event.expires_at == clock() + timedelta(seconds=30), "the leaf's deadline, carried up as is"
    assert (event.run_id, event.tool_call_id) == (stream.run_id, "t1")
    assert event.agent_path == ("top", "mid", "data")
    assert (event.tool_name, event.args) == ("delete_record", {"id": "u1"})
    assert approval.payload == event.payload(), "the chunk's payload is written from the event"
    assert approval.payload["expires_at"] == event.expires_at.isoformat()
