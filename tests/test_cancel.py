"""Cancelling a run (issue 41), on both executors: wherever it stands (in a model turn, in an async or a
sync tool, paused at any depth of a tree), the cancel is durable when it is acknowledged, the run never
goes on, its subagents' runs are cancelled with it, and a cancelled subagent's run is a tool error its
parent's model hears. What a sync tool returns after the cancel is recorded, never given to a model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from blocking import wait_for
from cancel_agents import phases, tree, worker
from helpers import chunks_of, delete_tool, one_call
from troupe.core.run.delegation import child_run_id

from troupe import Agent, Runtime, SqliteStore
from troupe.errors import (
    CancelForbiddenError,
    DecisionConflictError,
    RunCancelledError,
    RunNotCancellableError,
    SnapshotNotFoundError,
)
from troupe.testing import CallLog

RuntimeFactory = Any


@pytest.fixture
def log(tmp_path: Path) -> CallLog:
    return CallLog(tmp_path / "calls.jsonl")


async def _audit(runtime: Runtime, run_id: str) -> list[tuple[str, str, str | None]]:
    return [(e.kind, e.tool_call_id, e.reason) for e in await runtime.store().list_audit(run_id)]


async def _gone(runtime: Runtime, *run_ids: str) -> None:
    """Every run's snapshot is gone (a subagent's finished record too, once its parent ended)."""
    store = runtime.store()
    for run_id in run_ids:
        async with asyncio.timeout(30):
            while await store.load_run(run_id) is not None:
                await asyncio.sleep(0.02)


# ---- in flight ------------------------------------------------------------------------------------------


async def test_a_run_cancelled_in_its_model_turn_stops_there(make_runtime, log, tmp_path: Path):
    agent = worker(log, str(tmp_path / "tool-gate"), model_gate=str(tmp_path / "model-gate"))
    runtime = make_runtime([agent])
    stream = await agent.stream("work please", started_by="alice")
    await wait_for(lambda: phases(log, "worker") == ["turn"], what="the model's turn to start")

    answer = await agent.cancel_run(stream.run_id, reason="changed my mind", cancelled_by="alice")
    chunks = await chunks_of(stream)
    (tmp_path / "model-gate").touch()  # were the turn still going, it could finish now

    assert (answer.was, answer.cancelled_by, answer.reason) == ("running", "alice", "changed my mind")
    finish = chunks[-1]
    assert finish.type == "finish" and finish.payload["finish_reason"] == "cancelled"
    assert finish.payload["cancelled"]["reason"] == "changed my mind"
    assert (await stream.result()).finish_reason == "cancelled"
    await _gone(runtime, stream.run_id)
    await asyncio.sleep(0.2)
    assert phases(log, "worker") == ["turn"], "the model turn went on, or the model was asked again"
    assert phases(log, "work") == []
    assert await _audit(runtime, stream.run_id) == [("cancelled", "", "changed my mind")]


@pytest.mark.parametrize("sync", [False, True], ids=["async-tool", "sync-tool"])
async def test_a_run_cancelled_in_a_tool_stops_and_a_sync_tools_late_result_is_only_recorded(
    make_runtime, log, tmp_path: Path, sync: bool
):
    gate = tmp_path / "tool-gate"
    agent = worker(log, str(gate), sync=sync)
    runtime = make_runtime([agent])
    stream = await agent.stream("work please")
    await wait_for(lambda: phases(log, "work") == ["started"], what="the tool to start")

    await agent.cancel_run(stream.run_id, reason="too slow")  # the process itself: no name needed
    gate.touch()  # the tool may finish from now on: what it returns must not reach a model
    chunks = await chunks_of(stream)

    cut = [c for c in chunks if c.type == "tool-error"]
    assert [c.payload["tool_call_id"] for c in cut] == ["w1"] and cut[0].payload["cancelled"] is True
    assert "too slow" in cut[0].payload["result"]["error"]
    assert chunks[-1].payload["finish_reason"] == "cancelled"
    await _gone(runtime, stream.run_id)
    if sync:  # its thread cannot be stopped: it finishes, and what it returned is recorded, and only that
        await wait_for(lambda: phases(log, "work") == ["started", "finished"], what="the thread to finish")

        async def recorded() -> list[tuple[str, str, str | None]]:
            return await _audit(runtime, stream.run_id)

        async with asyncio.timeout(30):
            while len(await recorded()) < 2:
                await asyncio.sleep(0.02)
        late = [e for e in await runtime.store().list_audit(stream.run_id) if e.kind == "completed"]
        assert [(e.tool_call_id, e.result) for e in late] == [("w1", {"done": "job-1"})]
        assert "stopped while it ran" in (late[0].reason or "")
    else:  # cancelled through asyncio: it never got to finish
        await asyncio.sleep(0.3)
        assert phases(log, "work") == ["started"]
    await asyncio.sleep(0.2)
    assert phases(log, "worker") == ["turn"], "a model was given the tool's result"


# ---- paused, in a tree --------------------------------------------------------------------------------


def _runs(top_run: str, depth: int) -> list[str]:
    """The run ids from the top run down to the run whose tool waits."""
    runs = [top_run]
    for call in ("t1", "m1")[: depth - 1]:
        runs.append(child_run_id(runs[-1], call))
    return runs


@pytest.mark.parametrize("depth", [1, 2, 3])
async def test_cancelling_the_top_run_while_paused_at_any_depth_cancels_the_whole_tree(
    make_runtime, log, depth: int
):
    top = tree(log, depth)
    runtime = make_runtime([top])
    paused = await top.generate("clean up", started_by="alice")
    assert paused.finish_reason == "suspended" and len(paused.suspend_payload["agent_path"]) == depth

    await top.cancel_run(paused.run_id, reason="not today", cancelled_by="alice")

    runs = _runs(paused.run_id, depth)
    await _gone(runtime, *runs)
    for run_id in runs:  # each level recorded the cancel, and withdrew its pause
        audit = await _audit(runtime, run_id)
        assert ("cancelled", "", "not today") in audit, (run_id, audit)
        assert [a for a in audit if a[0] == "cancelled" and a[1]], (run_id, audit)
    assert log.count("delete_record") == 0
    assert listed(await top.list_suspended_runs()) == []
    with pytest.raises(RunCancelledError, match="cancelled by alice: not today"):
        await top.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="t1")
    await asyncio.sleep(0.2)
    assert all(p == ["turn"] for p in (phases(log, n) for n in ("top", "mid", "leaf")) if p), "a model ran"


def listed(found: Any) -> list[str]:
    return [r.run_id for r in found.runs]


@pytest.mark.parametrize("depth", [2, 3])
async def test_cancelling_a_waiting_subagents_run_is_a_tool_error_its_parents_model_hears(
    make_runtime, log, depth: int
):
    top = tree(log, depth)
    runtime = make_runtime([top])
    paused = await top.generate("clean up", started_by="alice")
    runs = _runs(paused.run_id, depth)
    below = "mid" if depth == 2 else "leaf"

    await runtime.get_agent(below).cancel_run(runs[-1], reason="wrong records", cancelled_by="alice")

    await _gone(runtime, *runs)
    parent = "top" if depth == 2 else "mid"
    heard = [e["told"] for e in log.entries(parent) if e.get("told")]
    assert len(heard) == 1, heard
    assert f"the subagent's run {runs[-1]} was cancelled by alice: wrong records" in heard[0][0]
    assert phases(log, "top") == ["turn", "turn"], "the top run did not go on to its answer"
    assert log.count("delete_record") == 0


async def test_cancelling_a_running_subagents_run_is_a_tool_error_its_parents_model_hears(
    make_runtime, log, tmp_path: Path
):
    from trees import delegating

    boss = Agent(
        "boss",
        model=delegating("boss", ("worker", "do it", "b1")),
        agents={"worker": worker(log, str(tmp_path / "g"))},
    )
    runtime = make_runtime([boss])
    stream = await boss.stream("go")
    await wait_for(lambda: phases(log, "work") == ["started"], what="the subagent's tool to start")
    child = child_run_id(stream.run_id, "b1")

    await runtime.get_agent("worker").cancel_run(child, reason="enough")
    result = await stream.result()

    assert result.finish_reason == "stop"
    assert (
        result.text.startswith("boss: b1=")
        and f"the subagent's run {child} was cancelled: enough" in result.text
    )


# ---- what a cancel refuses, and what refuses it -------------------------------------------------------


async def test_a_cancelled_or_finished_run_cannot_be_cancelled_and_a_stranger_cannot_cancel(
    make_runtime, log
):
    agent = Agent("ops", model=one_call("delete_record", {"id": "x"}), tools=[delete_tool(log)])
    make_runtime([agent])
    paused = await agent.generate("delete x", started_by="alice")

    with pytest.raises(CancelForbiddenError, match="'mallory' may not cancel"):
        await agent.cancel_run(paused.run_id, cancelled_by="mallory")
    first = await agent.cancel_run(paused.run_id, reason="stop", cancelled_by="alice")
    again = await agent.cancel_run(paused.run_id, reason="stop", cancelled_by="alice")  # a retry
    assert again.cancelled_at == first.cancelled_at
    with pytest.raises(RunCancelledError, match="cancelled by alice: stop"):
        await agent.cancel_run(paused.run_id, reason="another reason", cancelled_by="alice")
    with pytest.raises(SnapshotNotFoundError):
        await agent.cancel_run("no-such-run")

    other = await agent.generate("delete y")
    done = await agent.approve_tool_call_generate(run_id=other.run_id, tool_call_id="call-1")
    assert done.finish_reason == "stop"
    with pytest.raises(RunNotCancellableError, match="already finished"):
        await agent.cancel_run(done.run_id)


async def test_a_cancel_bound_to_a_call_loses_to_an_approval_that_came_first(make_runtime, log):
    agent = Agent("ops", model=one_call("delete_record", {"id": "x"}), tools=[delete_tool(log)])
    make_runtime([agent])
    paused = await agent.generate("delete x")
    seen = paused.suspend_payload

    approved = await agent.approve_tool_call_generate(
        run_id=paused.run_id, tool_call_id="call-1", decided_by="bob"
    )
    with pytest.raises(DecisionConflictError, match="already approved by bob"):
        await agent.cancel_run(paused.run_id, tool_call_id="call-1", fingerprint=seen["fingerprint"])

    assert approved.finish_reason == "stop" and log.count("delete_record") == 1


@pytest.mark.parametrize("executor", ["local"])  # the store's hooks are asyncio events of this loop
async def test_a_cancel_that_read_the_run_before_an_approval_landed_loses_to_it(make_runtime, log, tmp_path):
    """The cancel has read the call as waiting and is about to write when an approval lands: its
    compare-and-set fails, it reads again, and it loses, naming the approver; the tool ran once."""
    from store_hooks import HookedStore

    store = HookedStore(SqliteStore(tmp_path / "hooked.db"))
    agent = Agent("ops", model=one_call("delete_record", {"id": "x"}), tools=[delete_tool(log)])
    make_runtime([agent], storage=store)
    paused = await agent.generate("delete x")
    seen = paused.suspend_payload or {}
    reached, release = store.hold_next_save(paused.run_id)
    cancelling = asyncio.create_task(
        agent.cancel_run(paused.run_id, tool_call_id="call-1", fingerprint=seen["fingerprint"])
    )
    await reached.wait()  # read, checked, and about to write

    approved = await agent.approve_tool_call_generate(
        run_id=paused.run_id, tool_call_id="call-1", decided_by="bob"
    )
    release.set()

    with pytest.raises(DecisionConflictError, match="already approved by bob"):
        await cancelling
    assert approved.finish_reason == "stop" and log.count("delete_record") == 1


@pytest.mark.parametrize("stop", ["cancel", "max-duration"])
async def test_a_tool_that_catches_the_cancel_and_returns_does_not_take_the_run_on(
    make_runtime, log, tmp_path: Path, stop: str
):
    """A tool may catch the cancel that stops it (to clean up) and return. The run was stopped all the
    same (cancelled, or out of time): it ends there, and its model is not asked again."""
    agent = worker(log, str(tmp_path / "tool-gate"), tidies=True)
    runtime = make_runtime([agent])
    stream = await agent.stream("work please", max_duration_s=1.0 if stop == "max-duration" else None)
    await wait_for(lambda: phases(log, "work") == ["started"], what="the tool to start")

    if stop == "cancel":
        await agent.cancel_run(stream.run_id, reason="too slow")
    chunks = await chunks_of(stream)  # (out of time: once its second has passed)

    assert chunks[-1].payload["finish_reason"] == ("cancelled" if stop == "cancel" else "max-duration")
    await _gone(runtime, stream.run_id)
    assert phases(log, "work") == ["started", "tidied"]
    assert phases(log, "worker") == ["turn"], "the model was asked again after the run was stopped"
    if stop == "cancel":  # what it returned came after the cancel was durable: recorded only
        late = [e for e in await runtime.store().list_audit(stream.run_id) if e.kind == "completed"]
        assert [(e.tool_call_id, e.result) for e in late] == [("w1", {"tidied": "job-1"})]


# ---- deadlines ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sync", [False, True], ids=["async-tool", "sync-tool"])
async def test_a_tool_that_runs_past_its_timeout_is_a_tool_error_the_model_hears(
    make_runtime, log, tmp_path: Path, sync: bool
):
    gate = tmp_path / "tool-gate"
    agent = worker(log, str(gate), sync=sync, timeout_s=0.5)
    runtime = make_runtime([agent])

    try:
        async with asyncio.timeout(30):  # without the timeout, the tool would wait for ever
            result = await agent.generate("work please")
    finally:
        gate.touch()

    assert result.finish_reason == "stop"
    assert "'work' timed out after 0.5 s" in result.text
    if sync:  # its thread finished later: recorded, not told
        await wait_for(lambda: phases(log, "work") == ["started", "finished"], what="the thread to finish")
        store = runtime.store()
        async with asyncio.timeout(30):
            while not [e for e in await store.list_audit(result.run_id) if e.kind == "completed"]:
                await asyncio.sleep(0.02)
        late = [e for e in await store.list_audit(result.run_id) if e.kind == "completed"]
        assert late[0].result == {"done": "job-1"} and "timed out after 0.5 s" in (late[0].reason or "")
    assert len(phases(log, "worker")) == 2, "the model was asked once more, with the timeout"


async def test_a_run_past_its_max_duration_ends_with_max_duration(make_runtime, log, tmp_path: Path):
    gate = tmp_path / "tool-gate"
    agent = worker(log, str(gate))
    runtime = make_runtime([agent])

    try:
        async with asyncio.timeout(30):  # without the budget, the tool would wait for ever
            result = await agent.generate("work please", max_duration_s=1.0)
    finally:
        gate.touch()

    assert result.finish_reason == "max-duration"
    await _gone(runtime, result.run_id)
    audit = await runtime.store().list_audit(result.run_id)
    assert [(e.kind, e.decided_by) for e in audit] == [("cancelled", "max-duration")]
    assert "max_duration_s of 1 s" in (audit[0].reason or "")
    assert phases(log, "worker") == ["turn"]


async def test_time_waiting_for_a_person_counts_only_when_asked(make_runtime, log):
    agent = Agent("ops", model=one_call("delete_record", {"id": "x"}), tools=[delete_tool(log)])
    runtime = make_runtime([agent])
    waits = await agent.generate("delete x", max_duration_s=1.0)
    counts = await agent.generate("delete y", max_duration_s=1.0, duration_counts_waiting=True)
    await asyncio.sleep(1.5)

    expired = await runtime.expire_due()

    assert expired["ops"] == [counts.run_id]
    await _gone(runtime, counts.run_id)
    assert [e.kind for e in await runtime.store().list_audit(counts.run_id)] == ["cancelled", "cancelled"]
    done = await agent.approve_tool_call_generate(run_id=waits.run_id, tool_call_id="call-1")
    assert done.finish_reason == "stop" and log.count("delete_record") == 1


async def test_a_run_in_flight_of_another_process_stops_at_its_next_heartbeat(
    tmp_path: Path, log, monkeypatch
):
    """Two runtimes on one store, as two processes: the cancel is recorded by one while the other drives
    the run; the driving host finds it when it looks (each heartbeat) and stops the run there."""
    from troupe.actors import host

    monkeypatch.setattr(host, "HEARTBEAT_S", 0.1)
    db = tmp_path / "shared.db"
    driver_agent = worker(log, str(tmp_path / "gate"))
    other_agent = worker(log, str(tmp_path / "gate"))
    driving = Runtime([driver_agent], storage=SqliteStore(db), executor="local")
    other = Runtime([other_agent], storage=SqliteStore(db), executor="local")
    try:
        stream = await driver_agent.stream("work please")
        await wait_for(lambda: phases(log, "work") == ["started"], what="the tool to start")

        answer = await other_agent.cancel_run(stream.run_id, reason="from elsewhere")
        result = await stream.result()

        assert answer.was == "running"
        assert result.finish_reason == "cancelled"
        await _gone(other, stream.run_id)
        assert phases(log, "work") == ["started"] and phases(log, "worker") == ["turn"]
    finally:
        await driving.shutdown()
        await other.shutdown()
