"""Notifications reach the approver: signed webhooks from a durable outbox, at least once, never in a
run's way. Every receiver here is a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import delete_tool, echo_model
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from troupe.actors.webhook_sender import HttpSender
from troupe.core.notifying.dispatcher import Dispatcher
from troupe.core.notifying.outbox import KEEP_DELIVERED_S, Notifications, NotificationTarget, RetrySchedule
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.state import CallStatus, RunState
from troupe.core.vocabulary.store import OutboxEntry
from troupe.storage import MemoryStore
from webhook_receiver import Receiver, free_port

from troupe import Agent, Runtime, SqliteStore
from troupe.cli import main as cli_main
from troupe.ops.apps import load_notifications
from troupe.testing import CallLog, tool_call

TESTS = Path(__file__).resolve().parent
SECRET = "whsec_" + base64.b64encode(b"a test secret of 32 bytes length").decode()
LINK_SECRET = "whsec_" + base64.b64encode(b"the links' own key, not a hook's").decode()
# Attempts follow each other quickly here, so an outage of a few attempts takes a fraction of a second.
FAST = RetrySchedule(delays=(0.05,) * 200, timeout_s=2.0, lease_s=3.0, poll_s=0.05)


def ops_agent(calls: CallLog, n: int = 1) -> Agent:
    return Agent(
        "ops",
        model=echo_model(tool_call("delete_record", {"id": f"rec-{n}"}, id="call-1")),
        tools=[delete_tool(calls)],
    )


def notifications(
    *targets: NotificationTarget,
    retry: RetrySchedule = FAST,
    keep_delivered_s: float | None = KEEP_DELIVERED_S,
) -> Notifications:
    return Notifications(targets, retry=retry, keep_delivered_s=keep_delivered_s)


def hooked_runtime(
    db: Path, calls: CallLog, receiver: Receiver, keep_delivered_s: float | None = KEEP_DELIVERED_S
) -> Runtime:
    """The ops agent on a local host over SQLite ``db``, its events going to ``receiver`` ("hook")."""
    target = NotificationTarget(receiver.url, SECRET, name="hook")
    return Runtime(
        [ops_agent(calls)],
        storage=SqliteStore(db),
        executor="local",
        notifications=notifications(target, keep_delivered_s=keep_delivered_s),
    )


def notified(
    db: Path, agents: list[Agent], *targets: NotificationTarget, retry: RetrySchedule = FAST, **options: Any
) -> Runtime:
    """``agents`` on a local host over SQLite ``db``, their events going to ``targets``."""
    return Runtime(
        agents,
        storage=SqliteStore(db),
        executor="local",
        notifications=notifications(*targets, retry=retry),
        **options,
    )


async def until(check: Callable[[], Awaitable[bool]]) -> None:
    """Wait for a condition on the store (each look is a store read, not a guess about timing)."""
    async with asyncio.timeout(20):
        while not await check():
            await asyncio.sleep(0.02)


async def queued(store: Any, target: str, body: dict[str, Any]) -> None:
    """One event of run ``r1`` waiting in ``store``'s outbox for ``target``, due at once."""
    entry = OutboxEntry(id=f"e.{target}", event_id="e", target=target, run_id="r1", body=body, next_at=0.0)
    await store.create_run(RunState(run_id="r1", agent_id="ops"))
    await store.save_run(RunState(run_id="r1", agent_id="ops"), expected_version=1, outbox=(entry,))


def verified(received: Any) -> dict[str, Any]:
    payload: dict[str, Any] = Webhook(SECRET).verify(received.body, received.headers)
    assert received.headers["webhook-id"] == payload["id"]
    return payload


async def test_pause_and_decision_arrive_signed_and_verify(executor: str, tmp_path: Path, calls: CallLog):
    receiver = Receiver().start()
    other = Receiver().start()
    try:
        runtime = Runtime(
            [ops_agent(calls)],
            storage=SqliteStore(tmp_path / "n.db"),
            executor=executor,  # type: ignore[arg-type]
            notifications=notifications(
                NotificationTarget(receiver.url, SECRET, name="ops-hook", agents=frozenset({"ops"})),
                NotificationTarget(other.url, SECRET, name="payments", tools=frozenset({"pay"})),
            ),
        )
        agent = runtime.get_agent("ops")
        paused = await agent.generate("delete rec-1", resource_id="acme")
        (pause,) = await receiver.arrived(1)
        event = verified(pause)
        assert event["type"] == "tool-call.paused"
        assert event["data"]["runId"] == paused.run_id
        assert event["data"]["toolName"] == "delete_record" and event["data"]["args"] == {"id": "rec-1"}
        assert event["data"]["resourceId"] == "acme"
        assert event["data"]["fingerprint"] == paused.suspend_payload["fingerprint"]

        done = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by="alice")
        assert done.finish_reason == "stop"
        decided = verified((await receiver.arrived(2))[1])
        assert decided["type"] == "tool-call.decided"
        assert decided["data"]["decision"] == "approved" and decided["data"]["decidedBy"] == "alice"

        tampered = {**pause.headers, "webhook-signature": "v1," + base64.b64encode(b"x" * 32).decode()}
        with pytest.raises(WebhookVerificationError):
            Webhook(SECRET).verify(pause.body, tampered)

        async def both_delivered() -> bool:
            found = await runtime.deliveries(paused.run_id)
            return [d.status for d in found] == ["delivered", "delivered"]

        await until(both_delivered)
        assert other.received == [], "a target whose filter does not match gets nothing"
        await runtime.shutdown()
    finally:
        receiver.stop()
        other.stop()


async def test_a_slow_target_never_holds_up_another_targets_deliveries(tmp_path: Path, calls: CallLog):
    """Issue 40, MEDIUM 4: a batch of deliveries waited for its slowest member, so a receiver answering
    after a minute made another target's next events late by the same. Each target now has a lane of
    its own: with the slow receiver still holding the first event (its attempt may take a minute), the
    fast one gets the second event. An ordering, not a timing: the slow request is released only after."""
    slow, fast = Receiver().start(), Receiver().start()
    slow.answering.clear()  # every request is held until the test lets it go
    patient = RetrySchedule(delays=(0.05,), timeout_s=60.0, lease_s=120.0, poll_s=0.05)
    try:
        targets = [NotificationTarget(r.url, SECRET, name=n) for r, n in ((slow, "slow"), (fast, "fast"))]
        runtime = notified(tmp_path / "lanes.db", [ops_agent(calls)], *targets, retry=patient)
        agent = runtime.get_agent("ops")
        first = await agent.generate("delete rec-1", resource_id="acme")
        await slow.arrived(1)  # the slow receiver has it, and answers nothing yet
        await fast.arrived(1)
        later = [await agent.generate(f"delete rec-{n}", resource_id="acme") for n in (2, 3)]

        received = await fast.arrived(3, within=20.0)
        runs = [first.run_id, *(r.run_id for r in later)]
        assert [verified(r)["data"]["runId"] for r in received] == runs
        assert len(slow.received) == 1 and not slow.answering.is_set(), "the slow attempt is still open"

        slow.answering.set()
        held = await slow.arrived(3)
        assert sorted(verified(r)["data"]["runId"] for r in held) == sorted(runs)
        await runtime.shutdown()
    finally:
        slow.answering.set()
        slow.stop()
        fast.stop()


async def test_delivered_notifications_are_deleted_once_kept_long_enough(tmp_path: Path, calls: CallLog):
    receiver = Receiver().start()
    try:
        runtime = hooked_runtime(tmp_path / "n.db", calls, receiver, keep_delivered_s=0.5)
        agent = runtime.get_agent("ops")
        paused = await agent.generate("delete rec-1")
        await receiver.arrived(1)
        done = await agent.approve_tool_call_generate(run_id=paused.run_id)
        assert done.finish_reason == "stop"
        await receiver.arrived(2)

        async def all_gone() -> bool:
            return await runtime.deliveries(paused.run_id) == []

        await until(all_gone)  # the host's dispatcher deleted both, once delivered half a second ago
        await runtime.shutdown()
    finally:
        receiver.stop()


async def test_a_delivery_is_kept_keep_delivered_s_after_delivery_and_while_its_run_lives():
    store = MemoryStore()
    now = [1_000.0]
    dispatcher = Dispatcher(
        store,
        Notifications((NotificationTarget("http://127.0.0.1:9/", SECRET, name="hook"),), keep_delivered_s=60),
        owner="host-a",
        sender=HttpSender(),
        clock=lambda: now[0],
    )
    await queued(store, "hook", {})
    (claimed,) = await store.claim_deliveries("host-a", now=1_000.0, lease_s=10, limit=1)
    delivered = claimed.model_copy(update={"status": "delivered", "delivered_at": 1_000.0})
    assert await store.settle_delivery(delivered)

    now[0] = 1_070.0
    assert await dispatcher.prune() == 0, "its run is still paused: its pause may be announced again"
    await store.delete_run("r1")
    now[0] = 1_129.9
    assert await dispatcher.prune() == 0, "looked at again a whole keep_delivered_s after that"
    assert [d.status for d in await store.list_deliveries("r1")] == ["delivered"]
    now[0] = 1_130.0
    kept_for_good = Notifications(dispatcher.notifications.targets, keep_delivered_s=None)
    assert (
        await Dispatcher(
            store, kept_for_good, owner="host-b", sender=HttpSender(), clock=lambda: now[0]
        ).prune()
        == 0
    )
    assert await dispatcher.prune() == 1
    assert await store.list_deliveries("r1") == []
    for bad in (0, -1.0, float("inf"), "60", True):
        with pytest.raises(ValueError, match="keep_delivered_s"):
            Notifications(keep_delivered_s=bad)  # type: ignore[arg-type]


async def test_a_receiver_that_is_down_gets_every_event_once_it_is_back(tmp_path: Path, calls: CallLog):
    receiver = Receiver()  # not listening yet: connections are refused
    runtime = hooked_runtime(tmp_path / "n.db", calls, receiver)
    agent = runtime.get_agent("ops")
    run_ids = []
    for n in range(3):
        paused = await agent.generate(f"delete {n}")
        done = await agent.approve_tool_call_generate(run_id=paused.run_id)
        assert done.finish_reason == "stop", "the runs go on while nobody receives their events"
        run_ids.append(paused.run_id)
    assert len(calls.entries()) == 3

    async def retried_while_down() -> bool:
        found = [d for run_id in run_ids for d in await runtime.deliveries(run_id)]
        return len(found) == 6 and all(d.attempts >= 2 and d.status == "pending" for d in found)

    await until(retried_while_down)
    assert all("ConnectError" in (d.last_error or "") for d in await runtime.deliveries(run_ids[0]))

    receiver.start()
    try:
        received = await receiver.arrived(6)

        async def all_delivered() -> bool:
            found = [d for run_id in run_ids for d in await runtime.deliveries(run_id)]
            return all(d.status == "delivered" for d in found)

        await until(all_delivered)
        ids = [r.headers["webhook-id"] for r in receiver.received]
        assert len(ids) == len(set(ids)) == 6, "every event once, none twice"
        kinds = sorted(verified(r)["type"] for r in received)
        assert kinds == ["tool-call.decided"] * 3 + ["tool-call.paused"] * 3
    finally:
        await runtime.shutdown()
        receiver.stop()


async def test_a_failing_receiver_gives_up_and_a_delivery_can_be_sent_again(tmp_path: Path, calls: CallLog):
    receiver = Receiver(status=500).start()
    try:
        runtime = Runtime(
            [ops_agent(calls)],
            storage=SqliteStore(tmp_path / "n.db"),
            executor="local",
            notifications=notifications(
                NotificationTarget(receiver.url, SECRET, name="hook"),
                retry=RetrySchedule(delays=(0.01, 0.01), timeout_s=2.0, lease_s=3.0, poll_s=0.05),
            ),
        )
        paused = await runtime.get_agent("ops").generate("delete")
        assert paused.finish_reason == "suspended", "a failing receiver does not fail the run"

        async def gave_up() -> bool:
            return [d.status for d in await runtime.deliveries(paused.run_id)] == ["failed"]

        await until(gave_up)
        (failed,) = await runtime.deliveries(paused.run_id)
        assert failed.attempts == 3 and failed.last_error == "HTTP 500"
        assert len(await receiver.arrived(3)) == 3
        shown = await asyncio.to_thread(operator_show, paused.run_id, tmp_path / "n.db")
        assert "notifications:" in shown and failed.id in shown
        assert re.search(r"tool-call\.paused\s+hook\s+failed\s+3\s+HTTP 500", shown), shown

        receiver.status = 200
        await runtime.redeliver(failed.id)

        async def delivered() -> bool:
            return [d.status for d in await runtime.deliveries(paused.run_id)] == ["delivered"]

        await until(delivered)
        assert {r.headers["webhook-id"] for r in receiver.received} == {failed.event_id}
        await runtime.shutdown()
    finally:
        receiver.stop()


async def test_events_written_by_a_killed_host_are_delivered_by_the_next(tmp_path: Path):
    port = free_port()
    store = tmp_path / "n.db"
    run_id = _pause_in_a_killed_host(store, port, tmp_path / "c.jsonl")

    receiver = Receiver(port).start()
    runtime = hooked_runtime(store, CallLog(tmp_path / "c.jsonl"), receiver)
    try:
        (pending,) = await runtime.deliveries(run_id)
        assert pending.status == "pending", "the killed host never delivered it"
        await runtime.recover(0.0)  # starts this process's hosts, and with them their dispatchers
        (event,) = await receiver.arrived(1)
        assert verified(event)["data"]["runId"] == run_id
    finally:
        await runtime.shutdown()
        receiver.stop()


def operator_show(run_id: str, db: Path) -> str:
    """``troupe runs show RUN --store DB``, as an operator would run it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli_main(["runs", "show", run_id, "--store", str(db)]) == 0
    return out.getvalue()


def test_the_serve_notify_file_is_read_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "notify.json"
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    path.write_text(
        json.dumps(
            {
                "targets": [
                    {"name": "ops", "url": "http://127.0.0.1:9/hook", "secret_env": "HOOK_SECRET"},
                    {
                        "url": "https://chat.test/services/x",
                        "secret": SECRET,
                        "format": "chat",
                        "tools": ["pay"],
                    },
                ],
                "links": {"public_url": "https://troupe.test/", "secret": LINK_SECRET, "ttl_s": 600},
            }
        )
    )
    found = load_notifications(str(path))
    assert found.keep_delivered_s == 7 * 24 * 3600, "a week unless the file says otherwise"
    assert [t.name for t in found.targets] == ["ops", "chat.test"]
    assert found.targets[1].format == "chat" and found.targets[1].tools == frozenset({"pay"})
    assert found.links.public_url == "https://troupe.test" and found.links.ttl_s == 600
    assert SECRET not in repr(found), "secrets stay out of reprs"

    path.write_text(
        json.dumps({"targets": [{"url": "http://x", "secret": SECRET}], "keep_delivered_s": None})
    )
    assert load_notifications(str(path)).keep_delivered_s is None, "null keeps every delivery for good"
    for bad, says in (
        ({"targets": [{"url": "ftp://x", "secret": SECRET}]}, "url must be http"),
        ({"targets": [{"url": "http://x", "secret": "plain"}]}, "whsec_"),
        ({"targets": [{"url": "http://x", "secret_env": "NOT_SET_ANYWHERE"}]}, "NOT_SET_ANYWHERE is not set"),
        ({"targets": [{"url": "http://x", "secret": SECRET}], "links": {"secret": SECRET}}, "public_url"),
        ({"targets": [{"url": "http://x", "secret": SECRET}], "keep_delivered_s": "1d"}, "keep_delivered_s"),
        (
            {
                "targets": [{"url": "http://x", "secret": SECRET}],
                "links": {"public_url": "https://t", "secret": SECRET},
            },
            "key of their own",
        ),
    ):
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=says):
            load_notifications(str(path))


def _pause_in_a_killed_host(store: Path, port: int, log: Path) -> str:
    """Run notify_driver.py until its run has paused (its event unsent: the receiver is down), then
    SIGKILL it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    driver = subprocess.Popen(
        [sys.executable, str(TESTS / "notify_driver.py"), str(store), str(port), str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert driver.stdout is not None
        line = driver.stdout.readline()
        assert line.startswith("PAUSED "), f"driver said {line!r} (code {driver.poll()})"
        return line.split()[1]
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()


async def test_expiry_and_a_crash_interrupted_call_are_announced(tmp_path: Path, calls: CallLog):
    receiver = Receiver().start()
    runtime = hooked_runtime(tmp_path / "n.db", calls, receiver)
    try:
        agent = runtime.get_agent("ops")
        paused = await agent.generate("delete", approval_timeout=0.2)
        await receiver.arrived(1)
        await asyncio.sleep(0.3)  # the pause's own deadline passing (as in test_expiry.py)
        assert await runtime.expire_due() == {"ops": [paused.run_id]}
        expired = verified((await receiver.arrived(2))[1])
        assert expired["type"] == "tool-call.expired" and expired["data"]["decision"] == "expired"

        # A run left "running" inside its gated tool by a host that died: recovery re-asks the human.
        second = await agent.generate("delete again")
        store = runtime.store()
        stored = await store.load_run(second.run_id)
        assert stored is not None
        state = stored.state
        state.status, state.owner = "running", "a-host-that-died"
        state.calls[0].status = CallStatus.RUNNING
        state.calls[0].pauses = []
        await store.save_run(state, expected_version=stored.version)
        assert await runtime.recover(0.0) == {"ops": [second.run_id]}
        # Deliveries run concurrently: compare what arrived for the second run, in any order.
        events = [verified(r) for r in await receiver.arrived(5)]
        second_run = sorted(
            (e["type"], e["data"].get("interrupted", False), e["data"].get("gated", False))
            for e in events
            if e["data"]["runId"] == second.run_id
        )
        assert second_run == [
            ("tool-call.interrupted", False, True),  # the crash-interrupted call, a gated one
            ("tool-call.paused", False, False),  # its first pause
            ("tool-call.paused", True, False),  # asked again after recovery, marked interrupted
        ]
    finally:
        await runtime.shutdown()
        receiver.stop()


async def test_a_receiver_that_does_not_answer_holds_up_no_run(tmp_path: Path, calls: CallLog):
    receiver = Receiver().start()
    receiver.answering.clear()  # requests arrive, and hang there
    runtime = hooked_runtime(tmp_path / "n.db", calls, receiver)
    try:
        agent = runtime.get_agent("ops")
        # The receiver holds each request for up to a minute: the run must not wait for it at all.
        async with asyncio.timeout(20):
            paused = await agent.generate("delete")
            await receiver.arrived(1)  # the pause's event is being sent, and not answered
            done = await agent.approve_tool_call_generate(run_id=paused.run_id)
        assert done.finish_reason == "stop" and calls.count() == 1
        assert [d.status for d in await runtime.deliveries(paused.run_id)] == ["pending", "pending"]

        receiver.answering.set()

        async def delivered() -> bool:
            return [d.status for d in await runtime.deliveries(paused.run_id)] == ["delivered", "delivered"]

        await until(delivered)
    finally:
        receiver.answering.set()
        await runtime.shutdown()
        receiver.stop()


async def test_a_subagents_pause_is_announced_once_by_the_top_run(tmp_path: Path, calls: CallLog):
    """Issue 40's untested guarantee: only the top-level run announces a pause. The subagent's run,
    which pauses first (and checkpoints its pause before the top does), writes no event of its own."""
    receiver = Receiver().start()
    try:
        sup = Agent(
            "sup",
            model=echo_model(tool_call("agent-ops", {"prompt": "delete rec-1"}, id="d1")),
            agents={"ops": ops_agent(calls)},
        )
        runtime = notified(tmp_path / "tree.db", [sup], NotificationTarget(receiver.url, SECRET, name="hook"))
        paused = await runtime.get_agent("sup").generate("clean up")
        stored = await runtime.store().load_run(paused.run_id)
        assert stored is not None
        child = stored.state.calls[0].child
        assert child is not None
        assert await runtime.deliveries(child.run_id) == [], "the subagent's run announces nothing"
        (announced,) = await runtime.deliveries(paused.run_id)
        assert announced.body["type"] == "tool-call.paused"
        assert announced.body["data"]["agentPath"] == ["sup", "ops"]
        (event,) = await receiver.arrived(1)
        assert verified(event)["data"]["runId"] == paused.run_id
        await runtime.shutdown()
    finally:
        receiver.stop()


@pytest.mark.parametrize(
    ("deciders", "shown"),
    [
        (["alice", "bob"], ["alice", "bob"]),
        # Two people both shown as "Alex": the id names who decided by issuer and subject.
        (
            [Principal(f"alex.{last}", "https://idp.test", "Alex") for last in ("smith", "jones")],
            ["Alex", "Alex"],
        ),
    ],
    ids=["two-names", "one-name-two-people"],
)
async def test_each_approver_of_a_quorum_gets_an_event_of_their_own(
    tmp_path: Path, calls: CallLog, deciders: list[str | Principal], shown: list[str]
):
    """Issue 40's untested guarantee: a decision's event id names who decided, so the approvals of two
    people towards a quorum are two events (two ``webhook-id``s), both delivered, not one that the
    second repeats."""
    from troupe.core.deciding.approvers import ApproverPolicy

    receiver = Receiver().start()
    try:
        runtime = notified(
            tmp_path / "quorum.db",
            [ops_agent(calls)],
            NotificationTarget(receiver.url, SECRET, name="hook"),
            approver_policies=[ApproverPolicy(tool="delete_record", quorum=3)],
        )
        agent = runtime.get_agent("ops")
        paused = await agent.generate("delete rec-1")
        for who in deciders:
            counted = await agent.approve_tool_call_generate(run_id=paused.run_id, decided_by=who)
            assert counted.finish_reason == "suspended"
        found = await runtime.deliveries(paused.run_id)
        recorded = [d for d in found if d.body["type"] == "tool-call.approval-recorded"]
        assert [d.body["data"]["decidedBy"] for d in recorded] == shown
        assert len({d.event_id for d in recorded}) == 2
        arrived = [verified(r) for r in await receiver.arrived(3)]
        assert len({e["id"] for e in arrived}) == 3
        await runtime.shutdown()
    finally:
        receiver.stop()


async def test_each_answer_to_a_tool_that_asks_twice_is_announced(tmp_path: Path):
    """A tool that suspend()s twice with the same arguments, answered twice by one person: two decisions,
    two ``tool-call.decided`` events with ids of their own, both delivered."""
    from pydantic import BaseModel

    from troupe import create_tool

    class Ask(BaseModel):
        question: str

    class Answer(BaseModel):
        answer: str

    class Where(BaseModel):
        city: str = ""

    async def booking(inp: Where, ctx: Any) -> Any:
        data = ctx.agent.resume_data
        if data is None:
            return await ctx.agent.suspend({"question": "How many people?"})
        if data.answer != "confirm":
            return await ctx.agent.suspend({"question": f"{data.answer} people: type confirm"})
        return {"booked": True}

    book = create_tool("book", "book a table", Where, booking, suspend_schema=Ask, resume_schema=Answer)
    agent = Agent("ops", model=echo_model(tool_call("book", {"city": "Oslo"}, id="call-1")), tools=[book])
    receiver = Receiver().start()
    try:
        hook = NotificationTarget(receiver.url, SECRET, name="hook")
        runtime = notified(tmp_path / "twice.db", [agent], hook)
        ops = runtime.get_agent("ops")
        result = await ops.generate("book")
        for answer in ("4", "confirm"):
            result = await ops.resume_generate({"answer": answer}, run_id=result.run_id, decided_by="dana")
        assert result.finish_reason != "suspended"
        # Two pauses and two answers.
        arrived = [verified(r) for r in await receiver.arrived(4)]
        decided = [e for e in arrived if e["type"] == "tool-call.decided"]
        assert [e["data"]["decision"] for e in decided] == ["resumed", "resumed"]
        assert len({e["id"] for e in decided}) == 2
        await runtime.shutdown()
    finally:
        receiver.stop()


def test_a_decisions_event_id_is_its_own_and_the_same_each_time_it_is_built():
    """Two people shown by one name, deciding within one clock tick (a coarse clock), are still two
    events: the id names issuer and subject. The same audit entry always gives the same id."""
    from datetime import UTC, datetime

    from troupe.core.notifying.outbox import decision_event
    from troupe.core.vocabulary.store import AuditEntry

    state = RunState(run_id="r1", agent_id="ops")
    at = datetime(2030, 1, 1, tzinfo=UTC)

    def approval(subject: str) -> AuditEntry:
        return AuditEntry(
            run_id="r1", agent_id="ops", tool_call_id="call-1", tool_name="delete_record", args={},
            fingerprint="f", kind="approval-recorded", decided_by="Alex", subject=subject,
            issuer="https://idp.test", decided_at=at,
        )  # fmt: skip

    smith, jones = approval("alex.smith"), approval("alex.jones")
    assert decision_event(state, smith).id != decision_event(state, jones).id
    assert decision_event(state, smith).id == decision_event(state, smith.model_copy()).id


def test_a_links_ttl_must_be_a_finite_number_of_seconds_above_zero(tmp_path: Path):
    """An infinite ttl_s failed every delivery of a pause before it was posted; 0 or less sent links that
    were born expired. Both are refused where they are given, naming ttl_s."""
    from troupe.core.notifying.links import LinkSigner

    for bad in (float("inf"), float("nan"), 0, -60.0, "600", None, True):
        with pytest.raises(ValueError, match="ttl_s"):
            LinkSigner("https://troupe.test", LINK_SECRET, ttl_s=bad)  # type: ignore[arg-type]
    assert LinkSigner("https://troupe.test", LINK_SECRET, ttl_s=600).ttl_s == 600
    path = tmp_path / "notify.json"
    for bad in (float("inf"), None, "600"):
        links = {"public_url": "https://t", "secret": LINK_SECRET, "ttl_s": bad}
        path.write_text(json.dumps({"targets": [{"url": "http://x", "secret": SECRET}], "links": links}))
        with pytest.raises(ValueError, match="ttl_s"):
            load_notifications(str(path))


async def test_a_delivery_whose_request_cannot_be_made_is_a_failed_attempt_that_backs_off():
    """Making the request fails (here: a pause entry whose links cannot be issued, its data damaged):
    each try is counted with its error, backs off by the schedule and in the end fails, never posting
    and never being claimed again at once, unannounced, for ever."""
    from troupe.core.notifying.links import LinkSigner

    receiver = Receiver().start()
    store = MemoryStore()
    now = [1_000.0]
    retry = RetrySchedule(delays=(5, 30), timeout_s=2.0, lease_s=3.0)
    target = NotificationTarget(receiver.url, SECRET, name="hook")
    links = LinkSigner("https://troupe.test", LINK_SECRET)
    dispatcher = Dispatcher(
        store, Notifications((target,), retry=retry, links=links), "host-a", HttpSender(), lambda: now[0]
    )
    body = {"id": "e", "type": "tool-call.paused", "timestamp": "", "data": {"kind": "approval"}}
    await queued(store, "hook", body)
    try:
        assert await dispatcher.pump("hook") == 1
        (tried,) = await store.list_deliveries("r1")
        assert (tried.status, tried.attempts, tried.next_at) == ("pending", 1, 1_005.0)
        assert tried.last_error is not None and tried.last_error.startswith("the request could not be made")
        assert "KeyError" in tried.last_error
        assert SECRET not in tried.last_error and LINK_SECRET not in tried.last_error
        assert await dispatcher.pump("hook") == 0, "it backs off: not claimed again before it is due"
        now[0] = 1_005.0
        assert await dispatcher.pump("hook") == 1
        now[0] = 1_035.0
        assert await dispatcher.pump("hook") == 1
        (gave_up,) = await store.list_deliveries("r1")
        assert (gave_up.status, gave_up.attempts) == ("failed", 3)
        assert receiver.received == []
    finally:
        await dispatcher.close()
        receiver.stop()


async def test_a_retry_after_the_links_expired_sends_fresh_ones_under_the_same_webhook_id():
    """A receiver down longer than the links' ttl_s: its retries resend the first attempt's links while
    they still live, then fresh ones that work, never links that expired before they were delivered;
    the webhook-id stays the event's."""
    import time

    from troupe.core.notifying.links import LinkSigner
    from troupe.core.vocabulary.errors import DecisionLinkError

    receiver = Receiver(status=503).start()
    store = MemoryStore()
    now = [time.time()]  # ahead of the real time only (stores forget expired links by the real clock)
    retry = RetrySchedule(delays=(30, 29, 30), timeout_s=2.0, lease_s=3.0)
    signer = LinkSigner("https://troupe.test", LINK_SECRET, ttl_s=60)
    target = NotificationTarget(receiver.url, SECRET, name="hook")
    dispatcher = Dispatcher(
        store, Notifications((target,), retry=retry, links=signer), "host-a", HttpSender(), lambda: now[0]
    )
    data = {"kind": "approval", "agentId": "ops", "runId": "r1", "toolCallId": "call-1", "fingerprint": "f"}
    body = {"id": "e", "type": "tool-call.paused", "timestamp": "", "data": data}
    await queued(store, "hook", body)
    try:
        sent, start = [], now[0]
        # At +0 and +30 the receiver fails; at +59 it is back, and the first links (60 s) would expire
        # within that attempt's timeout.
        for step, after in enumerate((0, 30, 59)):
            now[0] = start + after
            if step == 2:
                receiver.status = 204
            assert await dispatcher.pump("hook") == 1
            sent.append(verified(receiver.wait_for(step + 1)[step]))
        first, second, third = (s["data"]["links"] for s in sent)
        assert second == first, "a retry while the links live sends the same links"
        assert third["approve"] != first["approve"] and third["decline"] != first["decline"]
        at = start + 60
        for link in (third["approve"], third["decline"]):
            assert (await signer.open(store, link.rsplit("/", 1)[1], now=at)).run_id == "r1"
        with pytest.raises(DecisionLinkError, match="expired"):
            await signer.open(store, first["approve"].rsplit("/", 1)[1], now=at)
        assert {r.headers["webhook-id"] for r in receiver.received} == {"e"}
        (delivered,) = await store.list_deliveries("r1")
        assert (delivered.status, delivered.attempts) == ("delivered", 3)
    finally:
        await dispatcher.close()
        receiver.stop()


def test_a_malformed_notify_file_is_refused_with_the_field_it_gets_wrong(tmp_path: Path):
    """Each malformed field of ``--notify``'s file is a ValueError naming it (which ``troupe serve`` shows
    as one line), not a traceback, and a name list given as a string is not read as its letters."""
    target = {"url": "http://127.0.0.1:9/hook", "secret": SECRET}
    path = tmp_path / "notify.json"
    for bad, says in (
        ({"retry": {"delay": [1, 2]}}, r"unknown keys \['delay'\]"),
        ({"retry": 5}, '"retry" must be an object'),
        ({"retry": {"timeout_s": "10"}}, "retry.timeout_s"),
        ({"retry": {"poll_s": 0}}, "retry.poll_s"),
        ({"retry": {"delays": [5, -5]}}, r"retry.delays\[1\]"),
        ({"retry": {"delays": "5"}}, "retry.delays"),
        ({"retry": {"lease_s": float("nan")}}, "retry.lease_s"),
        ({"targets": [{**target, "agents": 5}]}, r"targets\[0\].agents must be a list"),
        ({"targets": [{**target, "agents": "ops"}]}, r"targets\[0\].agents must be a list"),
        ({"targets": [{**target, "tools": "pay"}]}, r"targets\[0\].tools must be a list"),
        ({"targets": [{**target, "resources": [1]}]}, r"targets\[0\].resources must be a list"),
        ({"links": {"public_url": "https://t", "secret": LINK_SECRET, "ttl_s": None}}, "ttl_s"),
    ):
        path.write_text(json.dumps({"targets": [target], **bad}))
        with pytest.raises(ValueError, match=says):
            load_notifications(str(path))
    with pytest.raises(ValueError, match="tools must be a list"):
        NotificationTarget("http://127.0.0.1:9/hook", SECRET, tools="pay")  # type: ignore[arg-type]
    path.write_text(json.dumps({"targets": [{**target, "agents": ["ops"], "tools": None}]}))
    (read,) = load_notifications(str(path)).targets
    assert (read.agents, read.tools) == (frozenset({"ops"}), None)


async def test_a_target_url_no_client_can_send_to_is_refused_or_a_failed_attempt_with_its_error():
    """A port out of range or a space or control character (a pasted tab) is refused where the target is
    made, without quoting the URL. One that only the HTTP client finds bad (an IPv4 address out of range)
    is a failed attempt with its error, the URL's credential never in it, never a delivery left pending
    unexplained."""
    for bad in ("https://127.0.0.1:99999/hook", "https://chat.test/services/T0K3N\t", "http://a b/x"):
        with pytest.raises(ValueError, match="notification target") as refused:
            NotificationTarget(bad, SECRET)
        assert "T0K3N" not in str(refused.value)
    with pytest.raises(ValueError, match="notification target named: url is not valid"):
        NotificationTarget("https://127.0.0.1:99999/hook", SECRET, name="named")

    store = MemoryStore()
    target = NotificationTarget("http://256.0.0.1:80/services/T0K3N", SECRET, name="chat")
    dispatcher = Dispatcher(store, Notifications((target,)), "host-a", HttpSender(), lambda: 1_000.0)
    body = {"id": "e", "type": "tool-call.decided", "timestamp": "", "data": {}}
    await queued(store, "chat", body)
    try:
        assert await dispatcher.pump("chat") == 1
        (tried,) = await store.list_deliveries("r1")
        assert (tried.status, tried.attempts, tried.next_at) == ("pending", 1, 1_001.0)
        assert tried.last_error is not None and "could not be made: InvalidURL" in tried.last_error
        assert "T0K3N" not in tried.last_error
    finally:
        await dispatcher.close()
