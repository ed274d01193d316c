"""Crash recovery: a run whose actor or driver dies resumes from its last checkpoint and finishes once.

An interrupted tool is re-run only if it is idempotent; a gated one goes back to its human marked
interrupted; any other is reported to the model as interrupted. Nothing runs twice by accident.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from blocking import blocking_tool, kill_actor, wait_for, worker_agent
from helpers import chunks_of, types_of

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog, FunctionModel, text, tool_call

TESTS = Path(__file__).resolve().parent


def started(log: CallLog) -> int:
    return sum(1 for e in log.entries("work") if e["phase"] == "started")


def finished(log: CallLog) -> int:
    return sum(1 for e in log.entries("work") if e["phase"] == "finished")


# ---- an agent actor killed mid-run (Ray restarts it) ------------------------------------------------


@pytest.fixture
def worker_setup(tmp_path: Path, ray_session):
    log = CallLog(tmp_path / "calls.jsonl")
    gate = str(tmp_path / "gate")
    return log, gate, tmp_path / "t.db"


async def _kill_mid_tool(runtime: Runtime, agent, log: CallLog, gate: str):
    stream = await agent.stream("work please")
    await wait_for(lambda: started(log) == 1, what="the tool to start")
    await kill_actor(runtime.handle("worker").actor)
    Path(gate).touch()  # whatever runs from now on may finish
    return stream, await chunks_of(stream)


async def test_a_killed_actor_restarts_and_reports_the_interrupted_tool_without_rerunning_it(worker_setup):
    log, gate, db = worker_setup
    agent = worker_agent(log, gate)
    runtime = Runtime([agent], storage=SqliteStore(db), executor="ray")
    try:
        stream, chunks = await _kill_mid_tool(runtime, agent, log, gate)

        starts = [c for c in chunks if c.type == "start"]
        assert starts[-1].payload["recovered"] is True
        assert starts[-1].payload["interrupted_tool_calls"] == ["w1"]
        assert types_of(chunks).count("finish") == 1
        result = await stream.result()
        assert result.finish_reason == "stop"
        assert "w1=" in result.text and "interrupted" in result.text
        assert started(log) == 1 and finished(log) == 0, "the interrupted tool was not run again"
        assert await runtime.store().load_run(stream.run_id) is None
    finally:
        await runtime.shutdown()


async def test_an_idempotent_tool_interrupted_by_a_killed_actor_is_run_again(worker_setup):
    log, gate, db = worker_setup
    agent = worker_agent(log, gate, idempotent=True)
    runtime = Runtime([agent], storage=SqliteStore(db), executor="ray")
    try:
        stream, _ = await _kill_mid_tool(runtime, agent, log, gate)

        result = await stream.result()
        assert result.text == 'w1={"done": "job-1"}'
        assert started(log) == 2 and finished(log) == 1
    finally:
        await runtime.shutdown()


async def test_an_approved_tool_interrupted_by_a_killed_actor_goes_back_to_its_human(worker_setup):
    log, gate, db = worker_setup
    agent = worker_agent(log, gate, require_approval=True)
    runtime = Runtime([agent], storage=SqliteStore(db), executor="ray")
    try:
        paused = await agent.generate("work please")
        approved = await agent.approve_tool_call(run_id=paused.run_id, tool_call_id="w1")
        await wait_for(lambda: started(log) == 1, what="the approved tool to start")
        await kill_actor(runtime.handle("worker").actor)
        chunks = await chunks_of(approved)

        again = [c for c in chunks if c.type == "tool-call-approval"]
        assert len(again) == 1
        assert again[0].payload["interrupted"] is True
        assert again[0].payload["tool_call_id"] == "w1"
        assert (await approved.result()).finish_reason == "suspended"
        listed = await agent.list_suspended_runs()
        assert listed.runs[0].pending[0].interrupted is True

        Path(gate).touch()
        done = await agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="w1")
        assert done.text == 'w1={"done": "job-1"}'
        assert started(log) == 2 and finished(log) == 1
        [first, second] = await runtime.store().list_audit(paused.run_id)
        assert first.kind == second.kind == "approved"
    finally:
        await runtime.shutdown()


def slow_answer_agent(log: CallLog, gate: str, answer_gate: str) -> Agent:
    """``worker_agent`` (its gated tool waits for ``gate``) whose answer turn, once the tool has run, records
    that it started and waits for ``answer_gate``: a process can be killed during that model turn."""

    async def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            return [tool_call("work", {"name": "job-1"}, id="w1")]
        log.record("answer", phase="started")
        while not os.path.exists(answer_gate):
            await asyncio.sleep(0.02)
        return text(" | ".join(f"{m['tool_call_id']}={m['content']}" for m in results))

    return Agent("worker", model=FunctionModel(turn), tools=[blocking_tool(log, gate, require_approval=True)])


@pytest.mark.parametrize("durability", ["sync", "exit"])
async def test_a_crash_during_the_model_turn_after_an_approved_tool(worker_setup, durability: str):
    """ "sync" wrote the tool's result before the model's next turn: the restarted actor goes on from it.
    "exit" had not: the approved call goes back to its human marked interrupted. Either way it ran once."""
    log, gate, db = worker_setup
    Path(gate).touch()  # the tool finishes at once; the answer turn is where the crash lands
    answer_gate = str(db.parent / "answer-gate")
    agent = slow_answer_agent(log, gate, answer_gate)
    runtime = Runtime([agent], storage=SqliteStore(db), executor="ray", durability=durability)
    try:
        paused = await agent.generate("work please")
        approved = await agent.approve_tool_call(run_id=paused.run_id, tool_call_id="w1")
        await wait_for(lambda: bool(log.entries("answer")), what="the model's answer turn to start")
        await kill_actor(runtime.handle("worker").actor)
        Path(answer_gate).touch()
        chunks = await chunks_of(approved)
        result = await approved.result()

        assert started(log) == 1 and finished(log) == 1, "the approved tool ran once"
        again = [c for c in chunks if c.type == "tool-call-approval"]
        if durability == "sync":
            assert again == [] and result.finish_reason == "stop"
            assert result.text == 'w1={"done": "job-1"}'
        else:
            assert [c.payload["interrupted"] for c in again] == [True]
            assert result.finish_reason == "suspended"
    finally:
        await runtime.shutdown()


# ---- a driver process killed with SIGKILL ------------------------------------------------------------


def _driver(
    tmp_path: Path, scenario: str, executor: str, address: str | None = None, **env: str
) -> subprocess.Popen:
    args = [
        sys.executable,
        str(TESTS / "crash_driver.py"),
        str(tmp_path / "t.db"),
        str(tmp_path / "calls.jsonl"),
        str(tmp_path / "gate"),
        scenario,
        executor,
    ]
    if address:
        args.append(address)
    env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)


def _read_run_id(proc: subprocess.Popen, word: str) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(word):
            return line.split()[1]
    raise AssertionError(f"driver exited before printing {word} (code {proc.wait()})")


async def _until_dead(store: SqliteStore, owner: str | None) -> None:
    async def alive() -> bool:
        return owner in await store.live_owners()

    for _ in range(300):
        if not await alive():
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"host {owner} kept its heartbeat after its driver was killed")


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


async def _killed_mid_tool(
    tmp_path: Path, scenario: str, executor: str = "local", address: str | None = None, **env: str
) -> tuple[str, SqliteStore]:
    """A driver whose run got into its tool, SIGKILLed there. Returns once its host's heartbeat has run
    out (under Ray the driver's actors die with it, a moment later; only then may the tool finish), with
    the tool released for whoever runs it next."""
    proc = _driver(tmp_path, scenario, executor, address, **env)
    run_id = _read_run_id(proc, "STARTED")
    await wait_for(lambda: started(CallLog(tmp_path / "calls.jsonl")) == 1, what="the tool to start")
    _kill(proc)
    store = SqliteStore(tmp_path / "t.db")
    stored = await store.load_run(run_id)
    assert stored is not None, "the killed driver's run was checkpointed"
    await _until_dead(store, stored.state.owner)
    (tmp_path / "gate").touch()
    return run_id, store


@pytest.mark.parametrize("driver_executor", ["local", "ray"])
async def test_a_run_whose_driver_is_killed_mid_tool_is_recovered_by_the_next_process(
    tmp_path: Path, ray_session, driver_executor: str
):
    log = CallLog(tmp_path / "calls.jsonl")
    address = ray_session.get_runtime_context().gcs_address if driver_executor == "ray" else None
    run_id, store = await _killed_mid_tool(tmp_path, "midtool", driver_executor, address)

    agent = worker_agent(log, str(tmp_path / "gate"))
    runtime = Runtime([agent], storage=store, executor=driver_executor)  # type: ignore[arg-type]
    try:
        recovered = await runtime.recover()
        assert recovered == {"worker": [run_id]}
        observed = await agent.observe_stream(run_id=run_id)
        result = await observed.result()
        assert result.finish_reason == "stop"
        assert "interrupted" in result.text
        assert started(log) == 1 and finished(log) == 0
        assert await runtime.store().load_run(run_id) is None
        assert await runtime.recover(wait_s=0) == {"worker": []}, "finished once, nothing left to recover"
    finally:
        await runtime.shutdown()


async def test_a_live_runtimes_reconciler_takes_over_the_run_of_a_killed_process(tmp_path: Path):
    """No recover(), no reader: the next round of a runtime's reconciler that was already running picks
    the run up. The dead driver beat fast (its lease lapses soon after the kill); the live reconciler is
    woken for its next round instead of waiting out its interval."""
    log, gate = CallLog(tmp_path / "calls.jsonl"), str(tmp_path / "gate")
    agent = worker_agent(log, gate)
    live = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        host = live.handle("worker").host
        await host.ping()  # serving (and supervised) before the other process starts its run
        run_id, store = await _killed_mid_tool(tmp_path, "midtool", TROUPE_HEARTBEAT_S="0.1")

        supervision = live.reconciler
        asked = supervision.wake()
        await wait_for(lambda: supervision.beats > asked, what="the live reconciler's next round")

        stored = await store.load_run(run_id)
        assert stored is None or stored.state.owner == host.owner, "the round left the run orphaned"
        result = await (await agent.observe_stream(run_id=run_id)).result()
        assert result.finish_reason == "stop" and "interrupted" in result.text
        assert started(log) == 1 and finished(log) == 0
        assert await store.load_run(run_id) is None
        await store.close()
    finally:
        await live.shutdown()


async def test_a_supervisor_killed_while_its_subagent_works_reattaches_to_it_once(tmp_path: Path):
    """The next process recovers both runs: the supervisor's delegation is re-attached to the subagent's
    run (never started afresh), whose interrupted tool is reported, and the supervisor finishes once."""
    from crash_driver import supervising

    log = CallLog(tmp_path / "calls.jsonl")
    run_id, store = await _killed_mid_tool(tmp_path, "delegated")

    boss = supervising(worker_agent(log, str(tmp_path / "gate")))
    runtime = Runtime([boss], storage=store, executor="local")
    try:
        await runtime.recover()
        result = await (await boss.observe_stream(run_id=run_id)).result()
        assert result.finish_reason == "stop", result
        assert result.text.startswith("boss: b1=") and "interrupted" in result.text, result.text
        assert started(log) == 1 and finished(log) == 0
        assert await runtime.recover(wait_s=0) == {"boss": [], "worker": []}
    finally:
        await runtime.shutdown()


async def test_a_run_paused_when_its_driver_is_killed_is_decided_by_the_next_process(tmp_path: Path):
    log = CallLog(tmp_path / "calls.jsonl")
    proc = _driver(tmp_path, "paused", "local")
    run_id = _read_run_id(proc, "PAUSED")
    _kill(proc)
    (tmp_path / "gate").touch()

    agent = worker_agent(log, str(tmp_path / "gate"), require_approval=True)
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        assert await runtime.recover(wait_s=0) == {"worker": []}, "a paused run needs no recovery"
        listed = await agent.list_suspended_runs()
        assert [r.run_id for r in listed.runs] == [run_id]
        done = await agent.approve_tool_call_generate(run_id=run_id, tool_call_id="w1")
        assert done.text == 'w1={"done": "job-1"}'
        assert started(log) == 1 and finished(log) == 1
    finally:
        await runtime.shutdown()


async def test_recover_leaves_runs_that_a_live_process_drives_alone(tmp_path: Path):
    log = CallLog(tmp_path / "calls.jsonl")
    gate = str(tmp_path / "gate")
    first = worker_agent(log, gate)
    busy = Runtime([first], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    stream = await first.stream("work please")
    await wait_for(lambda: started(log) == 1)

    second = worker_agent(log, gate)
    other = Runtime([second], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        assert await other.recover(wait_s=0.5) == {"worker": []}
        Path(gate).touch()
        result = await stream.result()
        assert result.text == 'w1={"done": "job-1"}'
        assert started(log) == 1 and finished(log) == 1
    finally:
        await other.shutdown()
        await busy.shutdown()


@pytest.mark.parametrize(
    "damage",
    [
        lambda body: {**body, "schema_version": 99},  # written by a newer Troupe sharing the store
        lambda body: "{not json",  # damaged
    ],
    ids=["newer-version", "damaged"],
)
async def test_a_run_that_cannot_be_read_does_not_keep_the_others_from_being_recovered(
    tmp_path: Path, damage: Any
):
    """Two runs left in flight by a dead host; one of them cannot be read by this Troupe. The other is
    recovered all the same (and the unreadable one is left as it is). Before the fix, reading it failed
    every supervision round, so no run of any agent was ever recovered, and ``recover()`` raised."""
    import json
    import sqlite3
    from contextlib import closing

    from helpers import delete_tool, one_call
    from troupe.core.vocabulary.state import RunState

    db = tmp_path / "t.db"
    store = SqliteStore(db)
    for run_id in ("readable", "unreadable"):
        ask = [{"role": "user", "content": "delete a"}]
        await store.create_run(RunState(run_id=run_id, agent_id="ops", owner="dead-host", messages=ask))
    await store.close()
    with closing(sqlite3.connect(db)) as raw, raw:
        body = json.loads(raw.execute("SELECT body FROM runs WHERE run_id = 'unreadable'").fetchone()[0])
        damaged = damage(body)
        raw.execute(
            "UPDATE runs SET body = ? WHERE run_id = 'unreadable'",
            (damaged if isinstance(damaged, str) else json.dumps(damaged),),
        )

    calls = CallLog(tmp_path / "calls.jsonl")
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(db), executor="local")
    try:
        assert await runtime.recover(wait_s=0) == {"ops": ["readable"]}
        result = await (await agent.observe_stream(run_id="readable")).result()
        assert result.finish_reason == "suspended", "the recovered run goes on to its pause"
        assert await runtime.store().list_running_runs("ops") == ["unreadable"], "left as it is"
    finally:
        await runtime.shutdown()
