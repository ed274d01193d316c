"""What an approval cycle costs in calls to the agent's actor on Ray: one to start (it comes back with the
pause) and one to decide (a quick tool's whole answer comes back with it), and no task in this process to
read what is left of either (nothing is). A tool that takes its time does
not hold the decision's call: the stream opens at once and the answer follows. The actor's event loop is
uvloop, a dependency of Troupe's."""

from __future__ import annotations

import asyncio
import importlib.metadata
from pathlib import Path
from typing import Any

import pytest
from blocking import blocking_tool
from helpers import delete_tool, echo_model, one_call
from troupe.actors.host import _MAX_BATCH, Outbox
from troupe.actors.remote import RayActor
from troupe.core.vocabulary.chunks import Chunk

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog, tool_call


@pytest.fixture
def actor_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The methods this process calls on actors, whichever transport carries them."""
    sent: list[str] = []
    call = RayActor.call

    async def counted(self: RayActor, method: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(method)
        return await call(self, method, *args, **kwargs)

    monkeypatch.setattr(RayActor, "call", counted)
    return sent


def _stream_tasks(tasks: set[asyncio.Task[Any]]) -> list[str]:
    """The tasks of ``tasks`` that read an operation's batches for an ``AgentStream``."""
    names = [t.get_coro().__qualname__ for t in tasks]  # type: ignore[union-attr]
    return [name for name in names if name.startswith("AgentStream.")]


async def test_an_approval_cycle_is_two_calls_to_the_actor(
    ray_session: Any, tmp_path: Path, actor_calls: list[str]
):
    calls = CallLog(tmp_path / "calls.jsonl")
    agent = Agent("w1", model=one_call("delete_record", {"id": "r1"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="ray")
    try:
        for _ in range(2):  # the first cycle also opens the line to the actor
            actor_calls.clear()
            before = asyncio.all_tasks()
            stream = await agent.stream("delete r1")
            # It came back whole with the call that opened it: no task is left to read the actor.
            assert not _stream_tasks(asyncio.all_tasks() - before)
            assert [c.type async for c in stream.full_stream][-1] == "tool-call-approval"
            approved = await agent.approve_tool_call(run_id=stream.run_id)
            assert "deleted" in (await approved.result()).text
        assert [m for m in actor_calls if m != "troupe_channel"] == ["open_start", "open_decision"]
    finally:
        await runtime.shutdown()


async def test_a_slow_tool_does_not_hold_the_decisions_call(
    ray_session: Any, tmp_path: Path, actor_calls: list[str]
):
    calls = CallLog(tmp_path / "calls.jsonl")
    gate = tmp_path / "gate"
    model = echo_model(tool_call("work", {"name": "j1"}, id="call-1"))
    agent = Agent("slow", model=model, tools=[blocking_tool(calls, str(gate), require_approval=True)])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="ray")
    try:
        paused = await agent.generate("work")
        # The decision's stream opens while the tool is still blocked: nothing waits on the gate here.
        approved = await asyncio.wait_for(agent.approve_tool_call(run_id=paused.run_id), 60)
        assert [e["phase"] for e in calls.entries("work")] in ([], ["started"])
        gate.touch()
        assert "done" in (await approved.result()).text
        assert actor_calls.count("next_batch") >= 1  # the answer came after the call, as it was ready
    finally:
        await runtime.shutdown()


async def test_an_agents_actor_runs_on_uvloop(ray_session: Any, tmp_path: Path):
    assert any(r.startswith("uvloop") for r in importlib.metadata.requires("troupe-runtime") or [])
    agent = Agent(
        "w1", model=one_call("delete_record", {"id": "r1"}), tools=[delete_tool(CallLog(tmp_path / "c"))]
    )
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="ray")
    try:
        stats = await runtime.handle("w1").actor.call("stats")  # type: ignore[attr-defined]
        assert stats["event_loop"] == "uvloop.Loop", stats
    finally:
        await runtime.shutdown()


async def test_an_agents_actor_keeps_its_startup_heap_out_of_full_collections(
    ray_session: Any, tmp_path: Path
):
    """Ray's and Troupe's modules and the agent, built once, are frozen out of the collector's passes:
    traced at each full collection, they stalled the call under way by 50-70 ms."""
    agent = Agent("w1", model=echo_model(), tools=[])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="ray")
    try:
        stats = await runtime.handle("w1").actor.call("stats")  # type: ignore[attr-defined]
        # An actor's process imports Ray and Troupe: tens of thousands of objects at least.
        assert stats["gc_frozen"] > 20_000, stats
    finally:
        await runtime.shutdown()


# ---- how a lingering reader is woken (in-process; the linger is long, so only a wake-up returns) --------


async def test_a_lingering_reader_gets_a_full_batch_at_once():
    outbox = Outbox()
    reading = asyncio.ensure_future(outbox.gather(linger=3600))
    for i in range(_MAX_BATCH):
        outbox.put(Chunk("text-delta", "r1", {"text": str(i)}))
        await asyncio.sleep(0)  # the reader runs between chunks, as it does between a run's steps
    chunks, done = await asyncio.wait_for(reading, 10)
    assert (len(chunks), done) == (_MAX_BATCH, False)


async def test_a_lingering_reader_gets_the_rest_when_the_operation_ends():
    outbox = Outbox()
    reading = asyncio.ensure_future(outbox.gather(linger=3600))
    outbox.put(Chunk("text-delta", "r1", {"text": "a"}))
    await asyncio.sleep(0)
    outbox.put(Chunk("text-delta", "r1", {"text": "b"}))
    outbox.close()
    chunks, done = await asyncio.wait_for(reading, 10)
    assert ([c.payload["text"] for c in chunks], done) == (["a", "b"], True)
