"""Redis goes away and comes back: nothing is lost, nothing runs twice, and the caller is told.

Each test has a redis-server of its own (``dedicated_redis``) that it kills with SIGKILL and restarts on
the same port and directory; the append-only file is fsynced on every write, so whatever Redis
acknowledged before the crash is there afterwards.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from blocking import wait_for, worker_agent
from helpers import chunks_of, delete_tool, one_call, types_of
from pydantic import BaseModel
from redis_server import RedisServer
from troupe.core.vocabulary.state import CallStatus, RunState
from troupe.storage import RedisStore

from troupe import Agent, NotificationTarget, Runtime, create_tool
from troupe.errors import StorageUnavailableError
from troupe.testing import CallLog

pytestmark = pytest.mark.redis


@pytest.fixture
async def store(dedicated_redis: RedisServer) -> AsyncIterator[RedisStore]:
    backend = RedisStore(dedicated_redis.url, prefix="outage:")
    yield backend
    await backend.close()


class NoInput(BaseModel):
    pass


class Gate:
    """Lets a test act while a tool is in the middle of running (the local executor shares its loop)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()


def gated_tool(log: CallLog, gate: Gate) -> Any:
    async def work(inp: NoInput, ctx: Any) -> dict[str, Any]:
        log.record("work", run_id=ctx.run_id)
        gate.started.set()
        await gate.release.wait()
        return {"worked": True}

    return create_tool("work", "Do something slow", NoInput, work)


async def test_a_paused_run_waits_out_a_redis_crash_and_is_approved_once_redis_is_back(
    dedicated_redis: RedisServer, store: RedisStore, make_runtime: Callable[..., Runtime], calls: CallLog
):
    agent = Agent("ops", model=one_call("delete_record", {"id": "abc-123"}), tools=[delete_tool(calls)])
    make_runtime([agent], storage=store)  # on Ray, each actor unpickles its own RedisStore
    paused = await agent.generate("delete abc-123")
    assert paused.finish_reason == "suspended"

    dedicated_redis.kill()

    with pytest.raises(StorageUnavailableError) as refused:
        await agent.approve_tool_call(run_id=paused.run_id, tool_call_id="call-1")
    assert dedicated_redis.url in refused.value.message
    assert "unavailable" in refused.value.message
    assert refused.value.code == "STORAGE_UNAVAILABLE"
    with pytest.raises(StorageUnavailableError):
        await agent.list_suspended_runs()
    assert calls.count() == 0

    dedicated_redis.start()

    listed = await agent.list_suspended_runs()
    assert [r.run_id for r in listed.runs] == [paused.run_id]
    assert listed.runs[0].pending[0].tool_call_id == "call-1"
    approved = await agent.approve_tool_call(run_id=paused.run_id, tool_call_id="call-1")
    result = await approved.result()
    assert result.finish_reason == "stop"
    assert result.text == 'call-1={"deleted": "abc-123"}'
    assert calls.count("delete_record") == 1
    assert await store.load_run(paused.run_id) is None
    assert [e.kind for e in await store.list_audit(paused.run_id)] == ["approved"]


@pytest.mark.parametrize("executor", ["local"])  # the gate is an asyncio.Event of the test's loop
async def test_a_run_in_flight_when_redis_dies_fails_loudly_and_keeps_its_last_checkpoint(
    dedicated_redis: RedisServer, store: RedisStore, make_runtime: Callable[..., Runtime], calls: CallLog
):
    gate = Gate()
    agent = Agent("ops", model=one_call("work", {}), tools=[gated_tool(calls, gate)])
    make_runtime([agent], storage=store)
    stream = await agent.stream("work")
    await asyncio.wait_for(gate.started.wait(), 10)

    dedicated_redis.kill()
    gate.release.set()  # the tool returns; the checkpoint after it finds Redis gone
    chunks = await chunks_of(stream)

    assert types_of(chunks)[-2:] == ["error", "finish"]
    error = chunks[-2].payload["error"]
    assert error["code"] == "STORAGE_UNAVAILABLE"
    assert dedicated_redis.url in error["message"]
    assert chunks[-1].payload["finish_reason"] == "error"
    with pytest.raises(StorageUnavailableError):
        await stream.result()

    dedicated_redis.start()

    stored = await store.load_run(stream.run_id)
    assert stored is not None, "the last checkpoint must survive both the failure and the Redis crash"
    assert stored.state.status == "running"
    assert [(c.tool_name, c.status) for c in stored.state.calls] == [("work", CallStatus.RUNNING)]
    assert await store.list_running_runs("ops") == [stream.run_id]
    assert calls.count("work") == 1


async def test_an_approved_tool_that_completes_while_redis_is_down_is_not_asked_about_again(
    dedicated_redis: RedisServer, store: RedisStore, make_runtime: Callable[..., Runtime], tmp_path: Path
):
    """The approved tool completes, but the write of its result finds Redis gone. Its host still holds
    the outcome: once Redis is back the run goes on with it. Before the fix the outcome was dropped,
    the call went back to its human as "interrupted", and approving it again ran it twice."""
    log, gate = CallLog(tmp_path / "work.jsonl"), tmp_path / "gate"
    agent = worker_agent(log, str(gate), require_approval=True)
    runtime = make_runtime([agent], storage=store)
    paused = await agent.generate("work")
    assert paused.finish_reason == "suspended"
    stream = await agent.approve_tool_call(run_id=paused.run_id, tool_call_id="w1")
    await wait_for(lambda: len(log.entries("work")) == 1, what="the tool to start")

    dedicated_redis.kill()
    gate.touch()  # the tool completes; the write of its outcome finds Redis gone
    with pytest.raises(StorageUnavailableError):
        await stream.result()

    dedicated_redis.start()
    await runtime.recover()  # (or the runtime's own next round, whichever comes first)
    result = await (await agent.observe_stream(run_id=paused.run_id)).result()

    assert result.finish_reason == "stop"
    assert result.text == 'w1={"done": "job-1"}', "the run goes on with the result the tool returned"
    assert [e["phase"] for e in log.entries("work")] == ["started", "finished"], "run once"
    assert (await agent.list_suspended_runs()).total == 0, "nothing is asked of a person again"
    assert [e.kind for e in await store.list_audit(paused.run_id)] == ["approved", "completed"]


async def test_an_inbox_stream_whose_look_fails_in_an_outage_sends_what_it_missed_once_redis_is_back(
    dedicated_redis: RedisServer, calls: CallLog
):
    """A look of ``/api/inbox/events`` reads the change log, then the runs that entered: Redis dies in
    between. The stream says so (the route sends an error frame) and, once Redis is back, sends the run
    that entered. Before the fix it had moved past those changes already: the run never reached the
    open inbox, which showed nothing waiting until it was reloaded."""
    from store_hooks import HookedStore
    from troupe.api.inbox import inbox_json, run_json
    from troupe.api.inbox_feed import InboxFeed
    from troupe.core.vocabulary.identity import Principal

    hooked = HookedStore(RedisStore(dedicated_redis.url, prefix="feed:"))
    agent = Agent("ops", model=one_call("delete_record", {"id": "abc-123"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=hooked, executor="local")  # type: ignore[arg-type]
    try:
        admin = Principal(issuer="local", subject="admin", name="admin", admin=True)
        feed = InboxFeed(runtime, admin, inbox_json, run_json)
        first = await feed.next()
        assert first is not None and (first["type"], first["total"]) == ("page", 0)
        paused = await agent.generate("delete abc-123")

        hooked.before_next("load_run", dedicated_redis.kill)  # after the change log was read
        with pytest.raises(StorageUnavailableError):
            await feed.next()
        dedicated_redis.start()

        pushed = await feed.next()
        assert pushed is not None, "the run that entered while the store failed was never sent"
        assert pushed["type"] == "changes" and pushed["total"] == 1
        assert [r["runId"] for r in pushed["listed"]] == [paused.run_id]
    finally:
        await runtime.shutdown()


@pytest.mark.parametrize(
    ("loop", "method"),
    [
        ("host's lease renewal", "touch_owner"),  # its next renewal, within one beat (TROUPE_HEARTBEAT_S)
        ("runtime's reconciler", "list_running_runs"),
        ("notification dispatcher", "claim_deliveries"),
    ],
)
def test_a_program_whose_store_fails_in_a_background_loop_still_exits(
    loop: str, method: str, dedicated_redis: RedisServer, calls: CallLog
):
    """A program that ends without ``shutdown()`` (an outage raised out of ``generate``, say) leaves
    ``asyncio.run`` to cancel the background loops (a host's and the runtime's). When the store swallows
    that cancel (redis-py on Python 3.11 does, most of the time, if it lands while a command goes out),
    the loop must still stop: before the fix it went on for ever, and the program never exited. Seen as
    fault-injection drivers that hung after their redis-server was killed."""
    from store_hooks import HookedStore

    async def program() -> None:
        hooked = HookedStore(RedisStore(dedicated_redis.url, prefix="exit:"))
        agent = Agent("ops", model=one_call("delete_record", {"id": "x"}), tools=[delete_tool(calls)])
        nowhere = NotificationTarget("http://127.0.0.1:9/hook", "whsec_" + "A" * 32, name="hook")
        runtime = Runtime(
            [agent],
            storage=hooked,
            executor="local",
            notifications=[nowhere],  # type: ignore[arg-type]
        )
        host = runtime.handle("ops").host
        await host.ping()  # serving, renewing its lease, dispatching; the reconciler is running
        stalled = hooked.stall_next(method)
        if method == "list_running_runs":
            runtime.reconciler.wake()
        elif method == "claim_deliveries":
            host.dispatcher.poke()
        await stalled.wait()  # the loop is inside the store when the program ends

    # Its own thread and loop, as a program's main would have; daemon, so a hang cannot hold up pytest.
    main = threading.Thread(target=asyncio.run, args=(program(),), daemon=True)
    main.start()
    main.join(timeout=30)
    assert not main.is_alive(), f"asyncio.run never returned: the {loop} swallowed its cancel"


# A plain URL is served by the store's own connection; an option sends it through redis-py's client.
CLIENTS = pytest.mark.parametrize("options", ["", "?client_name=troupe-test"], ids=["own", "redis-py"])


@CLIENTS
async def test_a_write_to_a_redis_that_stopped_reading_times_out_as_unavailable(
    dedicated_redis: RedisServer, options: str
):
    """Writes are bounded by the store's timeout (with ``asyncio.timeout``, not redis-py's task per
    command): a Redis that is alive but reads nothing fails the write, it does not hang it; and the
    half-sent write is dropped with its connection, so it does not land once Redis reads again."""
    store = RedisStore(dedicated_redis.url + options, prefix="stalled:", timeout=0.5)
    # Connected, and the save script loaded (else the stalled write would be refused for its script).
    await store.create_run(RunState(run_id="small", agent_id="a"))
    # Larger than what the kernel buffers on both ends of a loopback connection, so the write blocks.
    big = RunState(run_id="big", agent_id="a", messages=[{"role": "user", "content": "x" * 64_000_000}])
    os.kill(dedicated_redis.pid, signal.SIGSTOP)
    try:
        with pytest.raises(StorageUnavailableError, match="Timeout writing"):
            await asyncio.wait_for(store.create_run(big), 20)
    finally:
        os.kill(dedicated_redis.pid, signal.SIGCONT)
    assert await store.load_run("big") is None
    assert await store.load_run("small") is not None
    await store.close()


@CLIENTS
async def test_a_redis_command_starts_no_task(dedicated_redis: RedisServer, options: str):
    """redis-py bounds each write with ``asyncio.wait_for``, a task per command on Python 3.11 (a third
    of the client's CPU per command); the store's connections bound writes without one."""
    store = RedisStore(dedicated_redis.url + options, prefix="tasks:")
    await store.create_run(RunState(run_id="warm", agent_id="a"))  # connected, scripts loaded
    loop = asyncio.get_running_loop()
    started: list[Any] = []

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **options: Any) -> asyncio.Task[Any]:
        started.append(coro)
        return asyncio.Task(coro, loop=loop, **options)

    loop.set_task_factory(counting)
    try:
        version = await store.create_run(RunState(run_id="r1", agent_id="a"))
        await store.delete_run("r1", expected_version=version)
    finally:
        loop.set_task_factory(None)
    assert started == []
    await store.close()
