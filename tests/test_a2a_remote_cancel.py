"""Cancelling runs that delegate to remote A2A agents (``A2AAgent``), on both executors, against real
remotes: a second Troupe process served over A2A (tests/a2a_remote_server.py) and agents written here
with the a2a-sdk's own server side (tests/a2a_agents.py).

- Cancelling the top supervisor while its remote subagent works, or waits for input: the remote task
  receives ``tasks/cancel`` (with the reason) and ends ``canceled``; the parent's pause is withdrawn; the
  audit records the cancel on both runs.
- Cancelling the proxy run directly fails the parent's delegation with a tool error its model sees,
  naming the cancel.
- A cancel racing an answer to the remote question: exactly one wins, and an answer is never sent once
  the cancel has won.
- A remote agent that cannot be reached for the cancel: the local run is cancelled all the same, and a
  log says the remote agent was not told.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest
from a2a_agents import AskingAgent, SdkServer, StubbornAgent, WorkingAgent, sdk_client
from a2a_trees import desk
from blocking import wait_for
from cancel_agents import phases, reporting
from google.protobuf.json_format import MessageToDict
from store_hooks import HookedStore
from test_a2a_remote import TroupeRemote
from troupe.actors.a2a.errors import DecisionNotDeliveredError
from troupe.actors.a2a.handle import A2AHandle
from troupe.core.run.delegation import child_run_id
from troupe.core.vocabulary.requests import CancelRequest, DecideRequest, Resume

from troupe import A2AAgent, Agent, Principal, Runtime, SqliteStore
from troupe.errors import DecisionConflictError, RunCancelledError
from troupe.testing import CallLog, tool_call

ALICE = Principal.named("alice")


@pytest.fixture
def remote_troupe(tmp_path):
    remote = TroupeRemote(tmp_path)
    yield remote
    remote.stop()


@pytest.fixture
def sdk_agents():
    """Serve an a2a-sdk agent executor (``sdk_agents(executor)``); stopped after the test."""
    started: list[SdkServer] = []

    def start(executor: Any) -> SdkServer:
        started.append(SdkServer(executor).start())
        return started[-1]

    yield start
    for server in started:
        server.stop()


async def audit_kinds(store: SqliteStore, run_id: str) -> list[tuple[str, str, str | None]]:
    return [(e.kind, e.tool_call_id, e.surface) for e in await store.list_audit(run_id)]


async def remote_task_state(url: str, task_id: str, key: str | None = None) -> str:
    client, http = await sdk_client(url, key)
    try:
        return str(MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))["status"]["state"])
    finally:
        await http.aclose()


async def remote_task_id(store: SqliteStore, top_run: str) -> str:
    """The task the proxy run under ``top_run``'s delegation call d1 follows, once the remote named it."""
    task_id: list[str] = []

    async def named() -> bool:
        stored = await store.load_run(child_run_id(top_run, "d1"))
        remote = stored.state.remote if stored is not None else None
        if remote is not None and remote.task_id:
            task_id.append(remote.task_id)
        return bool(task_id)

    async with asyncio.timeout(30):
        while not await named():
            await asyncio.sleep(0.05)
    return task_id[0]


async def remote_cancelled(remote: TroupeRemote, task_id: str) -> Any:
    """The remote Troupe's audit entry for the cancel of its run ``task_id`` (waited for)."""
    store = SqliteStore(remote.db)
    try:
        async with asyncio.timeout(30):
            while True:
                entries = [e for e in await store.list_audit(task_id) if e.kind == "cancelled"]
                run_entry = next((e for e in entries if not e.tool_call_id), None)
                if run_entry is not None:
                    return run_entry
                await asyncio.sleep(0.1)
    finally:
        await store.close()


# ---- cancelling the top supervisor ---------------------------------------------------------------------


async def test_cancelling_the_top_while_a_troupe_remote_works_cancels_the_remote_task(
    make_runtime, remote_troupe, tmp_path
):
    store = SqliteStore(tmp_path / "troupe.db")
    runtime = make_runtime([desk(remote_troupe.agent("slow"))], storage=store)
    agent = runtime.get_agent("desk")
    stream = await agent.stream("go", resource_id="r1", started_by="alice")
    await wait_for(lambda: phases(remote_troupe.calls, "work") == ["started"], what="the remote tool")
    task_id = await remote_task_id(store, stream.run_id)

    cancelled = await agent.cancel_run(stream.run_id, reason="not needed", cancelled_by=ALICE)
    assert cancelled.was == "running"
    result = await stream.result()
    assert result.finish_reason == "cancelled"

    entry = await remote_cancelled(remote_troupe, task_id)
    assert (entry.decided_by, entry.surface, entry.reason) == ("supervisor", "a2a", "not needed")
    assert phases(remote_troupe.calls, "work") == ["started"], "the remote tool was cancelled too"
    proxy = child_run_id(stream.run_id, "d1")
    assert ("cancelled", "", "system") in await audit_kinds(store, proxy)
    assert ("cancelled", "", "python") in await audit_kinds(store, stream.run_id)


async def test_cancelling_the_top_while_an_sdk_agent_works_cancels_its_task(
    make_runtime, sdk_agents, tmp_path
):
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_agents(WorkingAgent(log))
    store = SqliteStore(tmp_path / "troupe.db")
    runtime = make_runtime([desk(A2AAgent("vendor", card_url=server.url))], storage=store)
    agent = runtime.get_agent("desk")
    stream = await agent.stream("go", resource_id="r1", started_by="alice")
    await wait_for(lambda: log.count("working") == 1, what="the remote agent to work")
    task_id = await remote_task_id(store, stream.run_id)

    await agent.cancel_run(stream.run_id, reason="not needed")
    assert (await stream.result()).finish_reason == "cancelled"
    await wait_for(lambda: log.count("cancelled") == 1, what="tasks/cancel to reach the remote agent")
    assert log.entries("cancelled")[0]["task_id"] == task_id
    assert await remote_task_state(server.url, task_id) == "TASK_STATE_CANCELED"


@pytest.mark.parametrize("remote_kind", ["troupe", "sdk"])
async def test_cancelling_the_top_while_the_remote_waits_for_input(
    make_runtime, tmp_path, sdk_agents, remote_kind
):
    log = CallLog(tmp_path / "sdk.jsonl")
    troupe_side = TroupeRemote(tmp_path) if remote_kind == "troupe" else None
    try:
        if troupe_side is not None:
            remote = troupe_side.agent()
        else:
            remote = A2AAgent("vendor", card_url=sdk_agents(AskingAgent(log)).url)
        store = SqliteStore(tmp_path / "troupe.db")
        runtime = make_runtime([desk(remote)], storage=store)
        agent = runtime.get_agent("desk")
        paused = await agent.generate("go", resource_id="r1", started_by="alice")
        assert paused.finish_reason == "suspended", paused
        task_id = await remote_task_id(store, paused.run_id)

        cancelled = await agent.cancel_run(paused.run_id, reason="wrong desk", cancelled_by=ALICE)
        assert cancelled.was == "suspended"
        assert (await agent.list_suspended_runs()).total == 0, "the parent's pause is withdrawn"
        top = await audit_kinds(store, paused.run_id)
        assert ("cancelled", "", "python") in top and ("cancelled", "d1", "python") in top
        if troupe_side is not None:
            entry = await remote_cancelled(troupe_side, task_id)
            assert (entry.decided_by, entry.reason) == ("supervisor", "wrong desk")
            assert troupe_side.calls.count("delete_record") == 0
        else:
            await wait_for(lambda: log.count("cancelled") == 1, what="tasks/cancel to reach the agent")
            assert await remote_task_state(remote.where, task_id) == "TASK_STATE_CANCELED"
            assert log.count("answered") == 0
        with pytest.raises(RunCancelledError, match="cancelled by alice: wrong desk"):
            await agent.resume_generate("Lyon", run_id=paused.run_id, tool_call_id="d1")
    finally:
        if troupe_side is not None:
            troupe_side.stop()


# ---- cancelling the proxy run directly -------------------------------------------------------------------


async def test_cancelling_a_working_proxy_run_is_a_tool_error_the_parents_model_hears(
    make_runtime, sdk_agents, tmp_path
):
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_agents(WorkingAgent(log))
    store = SqliteStore(tmp_path / "troupe.db")
    runtime = make_runtime([desk(A2AAgent("vendor", card_url=server.url))], storage=store)
    agent = runtime.get_agent("desk")
    stream = await agent.stream("go", resource_id="r1", started_by="alice")
    await wait_for(lambda: log.count("working") == 1, what="the remote agent to work")
    proxy = child_run_id(stream.run_id, "d1")
    await remote_task_id(store, stream.run_id)

    request = CancelRequest(run_id=proxy, reason="enough", canceller=ALICE)
    assert (await runtime.cancel_run("vendor", request)).was == "running"
    result = await stream.result()
    assert result.finish_reason == "stop"
    told = f"the subagent's run {proxy} was cancelled by alice: enough"
    assert result.text == "d1=" + json.dumps({"error": told})
    await wait_for(lambda: log.count("cancelled") == 1, what="tasks/cancel to reach the agent")


async def test_a_proxy_run_cancelled_while_its_remote_refuses_to_stop_is_given_up_here(
    make_runtime, sdk_agents, tmp_path, caplog
):
    """The remote agent refuses the cancel and works on: the parent stops waiting for it all the same
    (its delegation ends with the cancel), and a log says the remote agent was not told."""
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_agents(StubbornAgent(log))
    store = SqliteStore(tmp_path / "troupe.db")
    runtime = make_runtime([desk(A2AAgent("vendor", card_url=server.url))], storage=store)
    agent = runtime.get_agent("desk")
    stream = await agent.stream("go", resource_id="r1", started_by="alice")
    await wait_for(lambda: log.count("working") == 1, what="the remote agent to work")
    proxy = child_run_id(stream.run_id, "d1")
    await remote_task_id(store, stream.run_id)

    with caplog.at_level(logging.WARNING, logger="troupe.actors.a2a.proxy_run"):
        await runtime.cancel_run("vendor", CancelRequest(run_id=proxy, reason="enough", canceller=ALICE))
    assert log.count("refused") == 1
    told = [r.getMessage() for r in caplog.records if "could not be told" in r.getMessage()]
    assert told and proxy in told[0] and "vendor" in told[0], caplog.text
    async with asyncio.timeout(30):  # not the remote agent's 300 s
        result = await stream.result()
    assert result.finish_reason == "stop"
    said = f"the subagent's run {proxy} was cancelled by alice: enough"
    assert result.text == "d1=" + json.dumps({"error": said})


async def test_cancelling_a_waiting_proxy_run_is_a_tool_error_the_parents_model_hears(
    make_runtime, sdk_agents, tmp_path
):
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_agents(AskingAgent(log))
    # desk's model records what it is told (its run goes on in its host once the cancel is claimed)
    first = tool_call("agent-vendor", {"prompt": "delete abc-123, please"}, id="d1")
    remote = A2AAgent("vendor", card_url=server.url)
    runtime = make_runtime([Agent("desk", model=reporting(log, "desk", first), agents={"vendor": remote})])
    agent = runtime.get_agent("desk")
    paused = await agent.generate("go", resource_id="r1", started_by="alice")
    assert paused.finish_reason == "suspended"
    proxy = child_run_id(paused.run_id, "d1")

    request = CancelRequest(run_id=proxy, reason="enough", canceller=ALICE)
    assert (await runtime.cancel_run("vendor", request)).was == "suspended"
    await wait_for(lambda: log.count("cancelled") == 1, what="tasks/cancel to reach the agent")
    await wait_for(lambda: log.count("desk") == 2, what="desk's model to hear of it")
    told = f"the subagent's run {proxy} was cancelled by alice: enough"
    assert log.entries("desk")[1]["told"] == [json.dumps({"error": told})]
    assert log.count("answered") == 0


# ---- a cancel racing an answer ----------------------------------------------------------------------------


async def paused_proxy(runtime: Runtime, store: Any) -> tuple[str, str, str]:
    """Pause ``desk`` on its remote agent's question; the proxy run, its call and the pause's fingerprint."""
    paused = await runtime.get_agent("desk").generate("go", resource_id="r1", started_by="alice")
    proxy = child_run_id(paused.run_id, "d1")
    stored = await store.load_run(proxy)
    assert stored is not None and stored.state.status == "suspended"
    (call,) = stored.state.calls
    return proxy, call.tool_call_id, call.pauses[0].fingerprint


async def answered(handle: A2AHandle, request: DecideRequest) -> list[Any]:
    batches = await handle.decide(request)
    return [c for batch in [b async for b in batches] for c in batch]


def answer_won(outcomes: list[Any], log: CallLog) -> None:
    """The answer was sent once and carried the run on; the cancel was refused, naming who won."""
    assert isinstance(outcomes[1], DecisionConflictError), outcomes
    assert "bob" in outcomes[1].message, "the loser is told who won"
    assert outcomes[0][-1].type == "finish"
    assert [e["answer"] for e in log.entries("answered")] == ["Lyon"]
    assert log.count("cancelled") == 0


async def cancel_won(outcomes: list[Any], log: CallLog) -> None:
    """The answer was refused and never left; the remote task was cancelled."""
    assert isinstance(outcomes[0], RunCancelledError) and "not sent" in outcomes[0].message, outcomes
    await wait_for(lambda: log.count("cancelled") == 1, what="tasks/cancel to reach the agent")
    assert log.count("answered") == 0


@pytest.mark.parametrize("first", ["answer", "cancel", "together"])
async def test_a_cancel_racing_an_answer_has_one_winner_and_no_answer_follows_a_cancel(
    sdk_agents, tmp_path, first
):
    """A cancel bound to the remote's question (as the inbox sends it) against an answer to it, both
    having read the run: the answer writes first, the cancel first (and is held before it tells the
    remote agent, the moment a wrongly sent answer would still be taken), or both at once."""
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_agents(AskingAgent(log))
    remote = A2AAgent("vendor", card_url=server.url)
    store = SqliteStore(tmp_path / "top.db")
    runtime = Runtime([desk(remote)], storage=store, executor="local")
    try:
        proxy, call_id, fingerprint = await paused_proxy(runtime, store)
        answering, cancelling = HookedStore(store, "answer"), HookedStore(store, "cancel")
        answer = DecideRequest(proxy, Resume("Lyon"), call_id, fingerprint, decider=Principal.named("bob"))
        cancel = CancelRequest(
            run_id=proxy, reason="race", tool_call_id=call_id, fingerprint=fingerprint, canceller=ALICE
        )
        deciding = lambda: answered(A2AHandle(remote, answering), answer)  # noqa: E731
        cancelling_ = lambda: A2AHandle(remote, cancelling).cancel(cancel)  # noqa: E731
        if first == "answer":
            cancel_read, cancel_write = cancelling.hold_next_save(proxy)
            answer_written, answer_send = answering.hold_after_next_save(proxy)
            racing = asyncio.ensure_future(cancelling_())
            await cancel_read.wait()  # the cancel has read the run, the call still waiting
            answering_ = asyncio.ensure_future(deciding())
            await answer_written.wait()  # the answer's claim is durable; not sent yet
            cancel_write.set()
            [lost] = await asyncio.gather(racing, return_exceptions=True)
            answer_send.set()
            answer_won([await answering_, lost], log)
        elif first == "cancel":
            answer_read, answer_write = answering.hold_next_save(proxy)
            cancel_written, cancel_tell = cancelling.hold_after_next_save(proxy)
            racing = asyncio.ensure_future(deciding())
            await answer_read.wait()  # the answer has read the run, the call still waiting
            cancelled = asyncio.ensure_future(cancelling_())
            await cancel_written.wait()  # the cancel is durable; the remote agent is not told yet
            answer_write.set()
            outcomes = await asyncio.gather(racing, return_exceptions=True)
            assert log.count("answered") == 0, "nothing was sent once the cancel had won"
            cancel_tell.set()
            outcomes.append(await cancelled)
            await cancel_won(outcomes, log)
        else:  # both read the run before either writes
            meet = asyncio.Barrier(2)
            answering.meet_before_save(proxy, meet)
            cancelling.meet_before_save(proxy, meet)
            outcomes = await asyncio.gather(deciding(), cancelling_(), return_exceptions=True)
            assert len([o for o in outcomes if isinstance(o, BaseException)]) == 1, outcomes
            if isinstance(outcomes[1], BaseException):
                answer_won(outcomes, log)
            else:
                await cancel_won(outcomes, log)
    finally:
        await runtime.shutdown()


async def test_an_answer_claimed_before_a_cancel_but_not_delivered_after_it_is_the_cancels(
    sdk_agents, tmp_path
):
    """The answer's claim is durable, then a cancel (bound to no call) is recorded and told, then the
    answer cannot be delivered: the decider hears the run was cancelled, and the answer never arrives."""
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_agents(AskingAgent(log))
    remote = A2AAgent("vendor", card_url=server.url)
    store = SqliteStore(tmp_path / "top.db")
    runtime = Runtime([desk(remote)], storage=store, executor="local")
    try:
        proxy, call_id, fingerprint = await paused_proxy(runtime, store)
        answering = HookedStore(store, "answer")
        claimed, release = answering.hold_after_next_save(proxy)
        answer = DecideRequest(proxy, Resume("Lyon"), call_id, fingerprint, decider=Principal.named("bob"))
        deciding = asyncio.ensure_future(A2AHandle(remote, answering).decide(answer))
        await claimed.wait()
        await A2AHandle(remote, store).cancel(CancelRequest(run_id=proxy, reason="stop", canceller=ALICE))
        assert log.count("cancelled") == 1
        server.stop()  # the answer cannot be delivered now
        release.set()
        with pytest.raises(RunCancelledError, match="cancelled by alice: stop"):
            await deciding
        assert log.count("answered") == 0
        stored = await store.load_run(proxy)
        assert stored is not None and stored.state.cancel is not None and stored.state.status == "finished"
    finally:
        await runtime.shutdown()


async def test_an_answer_from_a_process_that_cannot_fetch_the_card_leaves_the_call_paused(
    sdk_agents, tmp_path
):
    """A process that has not read the remote agent's card yet (a new one, after a restart) cannot send
    an answer while the remote agent is down: nothing left, so the claim is put back."""
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_agents(AskingAgent(log))
    remote = A2AAgent("vendor", card_url=server.url)
    store = SqliteStore(tmp_path / "top.db")
    runtime = Runtime([desk(remote)], storage=store, executor="local")
    try:
        proxy, call_id, fingerprint = await paused_proxy(runtime, store)
        server.stop()
        answer = DecideRequest(proxy, Resume("Lyon"), call_id, fingerprint)
        with pytest.raises(DecisionNotDeliveredError, match="card"):
            await A2AHandle(remote, store).decide(answer)  # a handle of its own: no card yet
        stored = await store.load_run(proxy)
        assert stored is not None and stored.state.status == "suspended"
        assert stored.state.calls[0].decision is None and stored.state.remote is not None
        assert stored.state.remote.answer_id is None
    finally:
        await runtime.shutdown()


# ---- a remote agent that cannot be reached for the cancel --------------------------------------------------


async def test_an_unreachable_remote_still_leaves_the_run_cancelled_and_a_log_says_so(
    make_runtime, sdk_agents, tmp_path, executor, caplog
):
    log = CallLog(tmp_path / "sdk.jsonl")
    server = sdk_agents(AskingAgent(log))
    store = SqliteStore(tmp_path / "troupe.db")
    runtime = make_runtime([desk(A2AAgent("vendor", card_url=server.url))], storage=store)
    agent = runtime.get_agent("desk")
    paused = await agent.generate("go", resource_id="r1")
    proxy = child_run_id(paused.run_id, "d1")
    server.stop()

    with caplog.at_level(logging.WARNING, logger="troupe.actors.a2a.proxy_run"):
        await agent.cancel_run(paused.run_id, reason="wrong desk")
        async with asyncio.timeout(30):
            while await store.load_run(paused.run_id) is not None:
                await asyncio.sleep(0.05)
    assert ("cancelled", "", "system") in await audit_kinds(store, proxy)
    assert (await agent.list_suspended_runs()).total == 0
    if executor == "local":  # on Ray the proxy run is cancelled in the supervisor's actor, logging there
        told = [r.getMessage() for r in caplog.records if "could not be told" in r.getMessage()]
        assert told and "vendor" in told[0] and proxy in told[0], caplog.text
    assert log.count("cancelled") == 0
