"""The guarantees (docs/concepts/guarantees.md), each with the ordering or interleaving it depends on
made observable.

- Checkpoint before announce: every pause chunk is emitted only once the write that made it durable has
  returned (a store wrapper records what is durable; the check runs at the moment the chunk is emitted).
- Exactly once across processes: two hosts that share only the store both read the paused run before
  either writes its claim (a barrier between load and save); the store's compare-and-set lets one win.
- A decided call is never decided again, even while its run is still paused on another call.
- A call waiting while its step still runs on another host is not decided there until the run pauses.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from blocking import wait_for, worker_agent
from helpers import delete_tool, echo_model, weather_tool
from pydantic import BaseModel
from store_hooks import HookedStore
from test_notifications import SECRET
from trees import two_levels
from troupe.api.errors import error_body, error_from_body
from troupe.core.notifying.outbox import NotificationTarget
from troupe.core.run.delegation import child_run_id
from troupe.core.run.engine import RunEngine
from troupe.core.vocabulary.errors import StorageUnavailableError
from troupe.core.vocabulary.requests import StartRequest

from troupe import Agent, Chunk, MemoryStore, Runtime, SqliteStore, create_tool
from troupe.errors import DecisionConflictError, RunInFlightError
from troupe.testing import CallLog, FunctionModel, text, tool_call

PAUSES = ("tool-call-approval", "tool-call-suspended")


async def _announced_after_checkpoint(
    agent: Agent, store: HookedStore, runtime: Runtime | None = None
) -> list[Chunk]:
    """Run ``agent`` to its pause on an engine whose sink checks, as each pause chunk is emitted, that the
    run's latest durable write already says it is suspended."""
    ports: dict[str, Any] = {}
    if runtime is not None:
        ports = {key: runtime.handle(sub.id) for key, sub in agent.agents.items()}
    engine = RunEngine(agent, store, ports)
    operation = await engine.begin_start(StartRequest("go"))
    emitted: list[Chunk] = []
    durable_at_emit: list[str | None] = []

    def emit(chunk: Chunk) -> None:
        emitted.append(chunk)
        if chunk.type in PAUSES:
            durable_at_emit.append(store.durable.get(chunk.run_id))

    await operation.execute(emit)
    pauses = [c for c in emitted if c.type in PAUSES]
    assert pauses, [c.type for c in emitted]
    assert durable_at_emit == ["suspended"] * len(pauses), "a pause was announced before its checkpoint"
    return pauses


async def test_a_pause_chunk_is_emitted_only_after_its_suspended_checkpoint_returned(tmp_path, calls):
    model = echo_model(tool_call("delete_record", {"id": "a"}, id="c1"), tool_call("weather", {}, id="c2"))
    agent = Agent("ops", model=model, tools=[delete_tool(calls), weather_tool(calls)])
    store = HookedStore(SqliteStore(tmp_path / "t.db"))

    pauses = await _announced_after_checkpoint(agent, store)

    assert [c.type for c in pauses] == ["tool-call-approval", "tool-call-suspended"]
    stored = await store.load_run(pauses[0].run_id)
    assert stored is not None and stored.state.status == "suspended"


async def test_a_pause_and_its_notification_are_one_write(tmp_path, calls):
    """The outbox entry announcing a pause is written by the very write that stores the run as paused:
    storage going down right after that write can never leave a paused run nobody is told about."""
    store = HookedStore(SqliteStore(tmp_path / "t.db"))
    store.fail_after_pause()
    hook = NotificationTarget("http://127.0.0.1:9/hook", SECRET, name="hook")  # nothing listens: kept
    agent = Agent(
        "ops", model=echo_model(tool_call("delete_record", {"id": "a"}, id="c1")), tools=[delete_tool(calls)]
    )
    runtime = Runtime([agent], storage=store, executor="local", notifications=[hook])
    try:
        with contextlib.suppress(StorageUnavailableError):
            await agent.generate("go", run_id="r1")
        stored = await store.inner.load_run("r1")
        assert stored is not None and stored.state.status == "suspended"
        kinds = [d.body["type"] for d in await store.inner.list_deliveries("r1")]
        assert kinds == ["tool-call.paused"], "a paused run whose pause was never put in the outbox"
    finally:
        await runtime.shutdown()


async def test_a_subagents_pause_is_announced_at_the_top_after_the_tops_checkpoint(tmp_path, calls):
    store = HookedStore(SqliteStore(tmp_path / "t.db"))
    sup = two_levels(calls)
    runtime = Runtime([sup], storage=store, executor="local")
    try:
        [pause] = await _announced_after_checkpoint(sup, store, runtime)
        assert pause.payload["agent_path"] == ["sup", "data"]
    finally:
        await runtime.shutdown()


async def test_two_hosts_that_both_read_the_paused_run_claim_its_call_once(tmp_path: Path):
    """As two processes would: two runtimes on one SQLite file, each with its own connection and host.
    Both decisions have the paused run (the host that paused it kept its state; the other read it) and
    are about to save their claims before either does; the loser's compare-and-set fails, it re-reads,
    and is told the call was decided. The winner's tool is held until the loser has heard."""
    log, gate, db = CallLog(tmp_path / "calls.jsonl"), str(tmp_path / "gate"), tmp_path / "t.db"
    stores = [HookedStore(SqliteStore(db), name) for name in ("one", "two")]
    agents = [worker_agent(log, gate, require_approval=True) for _ in stores]
    runtimes = [Runtime([a], storage=s, executor="local") for a, s in zip(agents, stores, strict=True)]
    try:
        paused = await agents[0].generate("work please")
        barrier = asyncio.Barrier(2)
        for store in stores:
            store.meet_before_save(paused.run_id, barrier)

        tasks = [
            asyncio.create_task(a.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="w1"))
            for a in agents
        ]
        started = lambda: sum(1 for e in log.entries("work") if e["phase"] == "started")  # noqa: E731
        await wait_for(lambda: any(t.done() for t in tasks) or started() == 2, what="one claim to lose")

        events = stores[0].events + stores[1].events
        claims = [e for e in events if e[0] == "before-save"]
        assert len(claims) == 2, "both deciders were about to claim the paused run (the barrier was passed)"
        assert started() == 1, "two hosts ran the approved tool"
        [lost] = [t for t in tasks if t.done()]
        assert isinstance(lost.exception(), DecisionConflictError)
        assert "already approved" in str(lost.exception())

        Path(gate).touch()
        [won] = [t for t in tasks if t is not lost]
        assert (await won).text == 'w1={"done": "job-1"}'
        assert [e.kind for e in await stores[0].list_audit(paused.run_id)] == ["approved"]
    finally:
        Path(gate).touch()
        for runtime in runtimes:
            await runtime.shutdown()


class Slow(BaseModel):
    n: int


def gated_and_slow(calls: CallLog, running: asyncio.Event, finish: asyncio.Event) -> Agent:
    """One step: a gated delete (c1) and an ungated call (c2) that runs until ``finish`` is set."""

    async def slow(inp: Slow, ctx: Any) -> dict[str, Any]:
        running.set()
        await finish.wait()
        calls.record("slow", n=inp.n)
        return {"slow": inp.n}

    model = echo_model(tool_call("delete_record", {"id": "a"}, id="c1"), tool_call("slow", {"n": 1}, id="c2"))
    return Agent("ops", model=model, tools=[delete_tool(calls), create_tool("slow", "Slow", Slow, slow)])


@pytest.mark.parametrize("shared", ["sqlite-file", "memory-store"])
async def test_a_call_is_not_decided_on_another_host_while_its_step_still_runs(
    tmp_path: Path, calls: CallLog, shared: str
):
    """Host A checkpoints the step (c1 waiting, c2 running, the run running) and runs c2; host B, a
    second runtime on the same store, reads c1 waiting. B's decision is refused, claiming nothing, as
    long as the step is in flight: claimed, it would close the step with no result for c2. Once c2 has
    finished and the run has paused, the same decision goes through and the model hears both results."""
    running, finish = asyncio.Event(), asyncio.Event()
    if shared == "sqlite-file":
        stores: tuple[Any, Any] = (SqliteStore(tmp_path / "t.db"), SqliteStore(tmp_path / "t.db"))
    else:
        stores = (MemoryStore(),) * 2
    here, there = (gated_and_slow(calls, running, finish) for _ in stores)
    runtimes = [Runtime([a], storage=s, executor="local") for a, s in zip((here, there), stores, strict=True)]
    try:
        stream = await here.stream("delete a, then the slow thing")
        await asyncio.wait_for(running.wait(), 30)
        stored = await stores[1].load_run(stream.run_id)
        assert stored is not None and stored.state.status == "running"
        assert [(c.tool_call_id, c.status.value) for c in stored.state.calls] == [
            ("c1", "awaiting-approval"),
            ("c2", "running"),
        ]

        for decide in (there.approve_tool_call_generate, there.decline_tool_call_generate):
            with pytest.raises(RunInFlightError, match="still in flight") as refused:
                await decide(run_id=stream.run_id)
        assert refused.value.details["owner"] == runtimes[0].handle("ops").host.owner  # type: ignore[attr-defined]
        assert "decide once the run has paused" in refused.value.message
        # Over HTTP: a 409 whose code tells a client to try again later.
        assert (refused.value.http_status, refused.value.code) == (409, "AGENT_RUN_IN_FLIGHT")
        assert isinstance(error_from_body(409, error_body(refused.value)), RunInFlightError)
        assert calls.entries("delete_record") == [], "the call was run on the other host"
        assert await stores[1].list_audit(stream.run_id) == [], "a refused decision was claimed"

        finish.set()
        paused = await stream.result()
        assert paused.finish_reason == "suspended" and paused.suspend_payload["tool_call_id"] == "c1"
        done = await there.approve_tool_call_generate(run_id=stream.run_id)
        assert done.text == 'c1={"deleted": "a"} | c2={"slow": 1}'
        assert [e.kind for e in await stores[1].list_audit(stream.run_id)] == ["approved"]
    finally:
        finish.set()
        for runtime in runtimes:
            await runtime.shutdown()


async def test_a_decided_call_is_refused_while_its_run_still_waits_on_another(make_runtime, calls):
    model = echo_model(
        tool_call("delete_record", {"id": "a"}, id="c1"), tool_call("delete_record", {"id": "b"}, id="c2")
    )
    agent = Agent("ops", model=model, tools=[delete_tool(calls)])
    make_runtime([agent])
    paused = await agent.generate("delete both")
    again = await agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="c1")
    assert again.finish_reason == "suspended", "c2 still waits"

    for decide in (agent.approve_tool_call_generate, agent.decline_tool_call_generate):
        with pytest.raises(DecisionConflictError, match="already approved"):
            await decide(run_id=paused.run_id, tool_call_id="c1")

    assert [e["id"] for e in calls.entries()] == ["a"]
    done = await agent.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="c2")
    assert done.finish_reason == "stop"
    assert [e["id"] for e in calls.entries()] == ["a", "b"]


async def test_a_recovery_working_from_a_stale_listing_leaves_a_live_hosts_run_alone(tmp_path: Path):
    """A host lists orphaned runs, then locks each one; meanwhile another host may have taken the run
    over. Under the lock the owner is read again: a run no longer owned by the dead host is left alone."""
    log, gate, db = CallLog(tmp_path / "calls.jsonl"), str(tmp_path / "gate"), tmp_path / "t.db"
    driving, late = worker_agent(log, gate), worker_agent(log, gate)
    runtimes = [Runtime([a], storage=SqliteStore(db), executor="local") for a in (driving, late)]
    try:
        stream = await driving.stream("work please")
        await wait_for(lambda: len(log.entries("work")) == 1, what="the tool to start")
        owner = runtimes[0].handle("worker").host.owner
        engine = runtimes[1].handle("worker").host.engine

        assert await engine.begin_recovery(stream.run_id, "a-host-that-died-earlier") is None

        stored = await runtimes[1].store().load_run(stream.run_id)
        assert stored is not None and stored.state.owner == owner
        Path(gate).touch()
        assert (await stream.result()).text == 'w1={"done": "job-1"}'
        assert [e["phase"] for e in log.entries("work")] == ["started", "finished"]
    finally:
        Path(gate).touch()
        for runtime in runtimes:
            await runtime.shutdown()


async def test_a_delegated_decision_is_audited_at_the_top_and_where_it_ran(make_runtime, calls):
    sup = two_levels(calls)
    runtime = make_runtime([sup])
    paused = await sup.generate("please delete u1")

    await sup.approve_tool_call_generate(run_id=paused.run_id, tool_call_id="d1", decided_by="alice")

    [top] = await runtime.store().list_audit(paused.run_id)
    assert (top.kind, top.tool_call_id, top.decided_by) == ("approved", "d1", "alice")
    assert top.agent_path == ["sup", "data"] and top.fingerprint == paused.suspend_payload["fingerprint"]
    [below] = await runtime.store().list_audit(child_run_id(paused.run_id, "d1"))
    assert (below.kind, below.tool_call_id, below.tool_name) == ("approved", "leaf-1", "delete_record")
    assert calls.count("delete_record") == 1


async def test_a_delegated_call_claimed_at_the_top_but_not_yet_accepted_below_is_decided_once(
    tmp_path: Path, calls: CallLog
):
    """Two hosts on one SQLite file. The first claims the supervisor's call and routes the decision to its
    subagent, whose claim of its run is held: the top is claimed but not yet audited (the audit waits for
    the subagent to accept). A second decision on the same call in that window is a conflict, not "not
    paused", and the tool runs once, after the hold is released."""
    db = tmp_path / "t.db"
    stores = [HookedStore(SqliteStore(db), name) for name in ("one", "two")]
    sups = [two_levels(calls) for _ in stores]
    runtimes = [Runtime([s], storage=st, executor="local") for s, st in zip(sups, stores, strict=True)]
    release = asyncio.Event()
    try:
        paused = await sups[0].generate("please delete u1")
        reached, release = stores[0].hold_next_save(child_run_id(paused.run_id, "d1"))
        first = asyncio.create_task(
            sups[0].approve_tool_call_generate(run_id=paused.run_id, tool_call_id="d1")
        )
        await asyncio.wait_for(reached.wait(), 30)

        stored = await stores[1].load_run(paused.run_id)
        assert stored is not None and stored.state.status == "running", "the top's claim is written"
        assert await stores[1].list_audit(paused.run_id) == [], "and not yet audited"
        for decide in (sups[1].approve_tool_call_generate, sups[1].decline_tool_call_generate):
            with pytest.raises(DecisionConflictError, match="already approved"):
                await decide(run_id=paused.run_id, tool_call_id="d1")
        assert calls.count("delete_record") == 0 and not first.done()

        release.set()
        assert (await first).finish_reason == "stop"
        assert calls.count("delete_record") == 1
        assert [e.kind for e in await stores[1].list_audit(paused.run_id)] == ["approved"]
    finally:
        release.set()
        for runtime in runtimes:
            await runtime.shutdown()


async def test_a_runs_first_write_goes_out_after_its_first_model_turn_has(tmp_path):
    """durability="sync": a streamed run's first write is sent ahead of its first model turn, and its own
    work (serializing the run; SqliteStore commits on the loop) starts only once that turn is under
    way, so the model's call never waits behind it."""
    order: list[str] = []

    class Recording(SqliteStore):
        async def create_run(self, state: Any) -> int:
            order.append("write")
            return await super().create_run(state)

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        order.append("model")
        return text("hello")

    store = Recording(tmp_path / "t.db")
    runtime = Runtime([Agent("a", model=FunctionModel(turn))], storage=store, executor="local")
    try:
        stream = await runtime.get_agent("a").stream("hi")
        assert "".join([t async for t in stream.text_stream]) == "hello"
    finally:
        await runtime.shutdown()
    assert order == ["model", "write"]


async def test_a_steps_checkpoint_goes_ahead_of_the_model_but_never_ahead_of_the_next_tool(tmp_path):
    """durability="sync": the checkpoint after a step's tools is sent and the model's next turn does not
    wait for it; the tool that turn asks for runs only once that checkpoint, and then the write marking
    the tool's call running, are durable."""
    store = HookedStore(SqliteStore(tmp_path / "t.db"))
    ran: list[str] = []
    holds: list[tuple[asyncio.Event, asyncio.Event]] = []
    run_ids: list[str] = []

    class Step(BaseModel):
        n: int

    def step(inp: Step, ctx: Any) -> dict[str, int]:
        ran.append(f"tool-{inp.n}")
        if inp.n == 1:  # the next write of this run: the checkpoint after this step
            run_ids.append(ctx.run_id)
            holds.append(store.hold_next_save(ctx.run_id))
        return {"n": inp.n}

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = sum(1 for m in messages if m["role"] == "tool")
        if done == 1:  # the next write, once the checkpoint is durable: the one marking s2 running
            holds.append(store.hold_next_save(run_ids[0]))
        return tool_call("step", {"n": done + 1}, id=f"s{done + 1}") if done < 2 else text("both done")

    agent = Agent("ops", model=FunctionModel(turn), tools=[create_tool("step", "A step", Step, step)])
    runtime = Runtime([agent], storage=store, executor="local")
    try:
        running = asyncio.create_task(agent.generate("two steps"))
        await wait_for(lambda: len(holds) == 2, what="the model's second turn")
        await wait_for(holds[0][0].is_set, what="the checkpoint after step 1, held")
        assert ran == ["tool-1"]
        holds[0][1].set()  # the checkpoint after step 1 becomes durable
        await wait_for(holds[1][0].is_set, what="the write marking s2 running")
        assert ran == ["tool-1"], "the second tool ran before the write marking its call running"
        holds[1][1].set()
        result = await running
    finally:
        for _, release in holds:
            release.set()
        await runtime.shutdown()
    assert result.text == "both done" and ran == ["tool-1", "tool-2"], result


async def test_a_checkpoint_sent_ahead_that_fails_fails_the_step_before_anything_else_runs(tmp_path):
    """The model's next turn went on without it, but nothing after that turn happens: the next tool
    never runs, the run fails with the storage error, and its last durable checkpoint is kept."""
    store = HookedStore(SqliteStore(tmp_path / "t.db"))
    ran: list[int] = []

    class Step(BaseModel):
        n: int

    def step(inp: Step, ctx: Any) -> dict[str, int]:
        ran.append(inp.n)
        store.fail_next_save(ctx.run_id)  # the checkpoint after this step
        return {"n": inp.n}

    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = sum(1 for m in messages if m["role"] == "tool")
        return tool_call("step", {"n": done + 1}, id=f"s{done + 1}") if done < 2 else text("both done")

    agent = Agent("ops", model=FunctionModel(turn), tools=[create_tool("step", "A step", Step, step)])
    runtime = Runtime([agent], storage=store, executor="local")
    try:
        stream = await agent.stream("two steps")
        chunks = [chunk async for chunk in stream.full_stream]
        stored = await store.inner.load_run(stream.run_id)
    finally:
        await runtime.shutdown()
    assert ran == [1], "a tool ran after the checkpoint before it failed"
    errors = [c.payload["error"]["code"] for c in chunks if c.type == "error"]
    assert errors == ["STORAGE_UNAVAILABLE"] and chunks[-1].type == "finish"
    assert stored is not None and stored.state.calls[0].status == "running", "kept for recovery"
