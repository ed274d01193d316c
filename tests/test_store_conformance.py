"""One conformance suite for every Store backend."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from troupe.core.vocabulary.listing import KEEP_CHANGES, PausedQuery
from troupe.core.vocabulary.state import CallStatus, ParentLink, Pause, RunState, ToolCallState
from troupe.core.vocabulary.store import (
    LINK_KEPT_S,
    AuditEntry,
    LinkRecord,
    OutboxEntry,
    StaleSnapshotError,
    Store,
    SuspendedRunQuery,
    ThreadAppend,
)
from troupe.storage import RedisStore

from troupe import MemoryStore, SqliteStore
from troupe.errors import DuplicateRunError, InvalidPaginationError

T0 = datetime(2026, 1, 1, tzinfo=UTC)


REDIS = pytest.mark.redis
# One server; a cluster of three masters (keys hash-tagged into shards spread over them); a master
# found through a Sentinel.
REDIS_FORMS = {
    "redis": lambda request: request.getfixturevalue("redis_url"),
    "redis-cluster": lambda request: request.getfixturevalue("redis_cluster").url,
    "redis-sentinel": lambda request: request.getfixturevalue("redis_sentinel").url,
}


def backend_of(request: pytest.FixtureRequest, tmp_path: Any, name: str = "s") -> Store:
    """A store of the kind the test is parametrised with; another ``name``, another store of it."""
    if request.param == "memory":
        return MemoryStore()
    if request.param == "sqlite":
        return SqliteStore(tmp_path / f"{name}.db")
    url = REDIS_FORMS[request.param](request)
    prefix = request.getfixturevalue("redis_prefix")
    return RedisStore(url, prefix=prefix if name == "s" else f"{prefix}{name}:")


EVERY_STORE = ["memory", "sqlite", *(pytest.param(p, marks=REDIS) for p in REDIS_FORMS)]


@pytest.fixture(params=EVERY_STORE)
async def store(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Store]:
    backend = backend_of(request, tmp_path)
    yield backend
    await backend.close()


def running(run_id: str, agent: str = "a", **fields: Any) -> RunState:
    return RunState(run_id=run_id, agent_id=agent, messages=[{"role": "user", "content": run_id}], **fields)


def suspended(
    run_id: str, at: datetime, agent: str = "a", expires_at: datetime | None = None, **fields: Any
) -> RunState:
    pause = Pause(
        kind="approval",
        tool_name="t",
        args={"x": 1},
        agent_path=[agent],
        fingerprint="f" * 32,
        paused_at=at,
        seq=1,
        expires_at=expires_at,
    )
    call = ToolCallState(
        tool_call_id="c1",
        tool_name="t",
        args={"x": 1},
        status=CallStatus.AWAITING_APPROVAL,
        requires_approval=True,
        pauses=[pause],
    )
    return running(run_id, agent, status="suspended", calls=[call], **fields)


def audit(run_id: str, kind: str = "approved") -> AuditEntry:
    return AuditEntry(
        run_id=run_id, agent_id="a", tool_call_id="c1", tool_name="t", args={}, fingerprint="f", kind=kind
    )


async def test_a_run_round_trips_and_ids_are_unique(store: Store):
    state = running("r1", thread_id="t1")
    assert await store.create_run(state) == 1
    loaded = await store.load_run("r1")
    assert loaded is not None and loaded.version == 1
    assert loaded.state == state
    assert loaded.state is not state
    with pytest.raises(DuplicateRunError):
        await store.create_run(state)
    assert await store.load_run("missing") is None


async def test_saves_are_compare_and_set_on_the_version(store: Store):
    state = running("r1")
    await store.create_run(state)
    state.step = 1
    assert await store.save_run(state, expected_version=1) == 2
    state.step = 99
    with pytest.raises(StaleSnapshotError):
        await store.save_run(state, expected_version=1)
    loaded = await store.load_run("r1")
    assert loaded is not None and loaded.state.step == 1 and loaded.version == 2
    with pytest.raises(StaleSnapshotError):
        await store.save_run(running("ghost"), expected_version=1)


async def test_concurrent_saves_at_one_version_have_exactly_one_winner(store: Store):
    await store.create_run(running("r1"))

    async def claim(step: int) -> int | None:
        state = running("r1", step=step)
        try:
            return await store.save_run(state, expected_version=1, audit=(audit("r1"),))
        except StaleSnapshotError:
            return None

    outcomes = await asyncio.gather(*(claim(i) for i in range(10)))

    assert [o for o in outcomes if o is not None] == [2]
    assert len(await store.list_audit("r1")) == 1, "the losers' audit entries were not written"


async def test_audit_entries_are_written_with_the_state_and_outlive_it(store: Store):
    await store.create_run(running("r1"))
    await store.save_run(running("r1"), expected_version=1, audit=(audit("r1"), audit("r1", "declined")))
    await store.delete_run("r1")

    assert await store.load_run("r1") is None
    assert [e.kind for e in await store.list_audit("r1")] == ["approved", "declined"]


async def test_an_audit_entry_is_appended_on_its_own_whatever_the_run_says_now(store: Store):
    """What a host learns after its run was taken over (a tool that finished late) goes to the run's
    audit log without a compare-and-set: whichever host holds the run, even once it has ended. A run on
    a thread lives in its thread's shard (Redis Cluster): its audit log is found there too."""
    await store.create_run(running("r1", thread_id="t9"))
    await store.save_run(running("r1", thread_id="t9"), expected_version=1, audit=(audit("r1"),))
    late = audit("r1", "completed").model_copy(update={"result": {"paid": 10}, "is_error": False})
    await store.append_audit(late)
    await store.save_run(running("r1", thread_id="t9"), expected_version=2, audit=(audit("r1", "declined"),))
    await store.delete_run("r1")
    await store.append_audit(late.model_copy(update={"tool_call_id": "c2"}))

    entries = await store.list_audit("r1")
    assert [e.kind for e in entries] == ["approved", "completed", "declined", "completed"]
    assert entries[1].result == {"paid": 10} and entries[1].is_error is False


async def test_a_finished_runs_id_is_never_used_again(store: Store):
    await store.create_run(running("r1", resource_id="tenant-a"))
    await store.save_run(running("r1"), expected_version=1, audit=(audit("r1"),))
    await store.delete_run("r1")

    # Another tenant picking the same id would otherwise add its decisions to this run's audit trail.
    with pytest.raises(DuplicateRunError):
        await store.create_run(running("r1", resource_id="tenant-b"))
    assert await store.load_run("r1") is None
    assert [e.kind for e in await store.list_audit("r1")] == ["approved"]
    await store.delete_run("r1")  # deleting a finished run again changes nothing
    with pytest.raises(StaleSnapshotError):
        await store.save_run(running("r1"), expected_version=1)
    assert (await store.list_suspended_runs(SuspendedRunQuery(agent_id=None)))[1] == 0


async def test_a_runs_first_write_stores_it_with_everything_it_carries(store: Store):
    # A run stored at its first checkpoint (its pause) is one atomic write: state, indexes, audit,
    # thread messages and outbox together, and only if its id is free.
    said = ThreadAppend("t1", "u1", [{"role": "user", "content": "delete r1"}])
    state = suspended("r1", T0, thread_id="t1", resource_id="u1")
    assert (
        await store.save_run(
            state, expected_version=0, audit=(audit("r1"),), thread=said, outbox=(delivery("r1", 1),)
        )
        == 1
    )
    loaded = await store.load_run("r1")
    assert loaded is not None and loaded.version == 1 and loaded.state == state
    assert [
        r.run_id for r in (await store.list_suspended_runs(SuspendedRunQuery("a", thread_id="t1")))[0]
    ] == ["r1"]
    assert [e.kind for e in await store.list_audit("r1")] == ["approved"]
    assert await store.load_messages("t1") == said.messages
    assert [e.event_id for e in await store.list_deliveries("r1")] == ["evt-r1-1"]

    with pytest.raises(DuplicateRunError):
        await store.save_run(suspended("r1", T0), expected_version=0, audit=(audit("r1", "declined"),))
    await store.delete_run("r1")
    with pytest.raises(DuplicateRunError):  # a finished run's id stays taken
        await store.save_run(running("r1"), expected_version=0)
    assert [e.kind for e in await store.list_audit("r1")] == ["approved"]
    assert await store.load_messages("t1") == said.messages


async def test_delete_checks_the_version_when_given(store: Store):
    await store.create_run(running("r1"))
    with pytest.raises(StaleSnapshotError):
        await store.delete_run("r1", expected_version=7)
    await store.delete_run("r1", expected_version=1)
    assert await store.load_run("r1") is None
    await store.delete_run("r1")


async def test_suspended_runs_are_listed_by_agent_thread_resource_and_time(store: Store):
    runs = [
        suspended("old", T0, thread_id="t1", resource_id="u1"),
        suspended("mid", T0 + timedelta(hours=1), thread_id="t1", resource_id="u2"),
        suspended("new", T0 + timedelta(hours=2), thread_id="t2", resource_id="u1"),
        suspended("other-agent", T0, agent="b", thread_id="t1"),
        running("busy", thread_id="t1"),
    ]
    for state in runs:
        await store.create_run(state)

    async def ids(**filters: Any) -> tuple[list[str], int]:
        found, total = await store.list_suspended_runs(SuspendedRunQuery(agent_id="a", **filters))
        return [s.run_id for s in found], total

    assert await ids() == (["new", "mid", "old"], 3)
    assert await ids(thread_id="t1") == (["mid", "old"], 2)
    assert await ids(resource_id="u1") == (["new", "old"], 2)
    assert await ids(from_date=T0 + timedelta(minutes=30)) == (["new", "mid"], 2)
    assert await ids(to_date=T0 + timedelta(minutes=30)) == (["old"], 1)
    assert await ids(offset=1, limit=1) == (["mid"], 3)
    assert await store.list_running_runs("a") == ["busy"]


async def test_thread_and_resource_filters_combine_and_page_together(store: Store):
    later = T0 + timedelta(hours=1)
    for i in range(5):
        at = T0 + timedelta(minutes=i)
        await store.create_run(suspended(f"both-{i}", at, thread_id="t1", resource_id="u1"))
    await store.create_run(suspended("thread-only", later, thread_id="t1", resource_id="u2"))
    await store.create_run(suspended("resource-only", later, thread_id="t2", resource_id="u1"))

    async def ids(**filters: Any) -> tuple[list[str], int]:
        query = SuspendedRunQuery(agent_id="a", thread_id="t1", resource_id="u1", **filters)
        found, total = await store.list_suspended_runs(query)
        return [s.run_id for s in found], total

    assert await ids() == (["both-4", "both-3", "both-2", "both-1", "both-0"], 5)
    assert await ids(offset=1, limit=2) == (["both-3", "both-2"], 5)
    assert await ids(offset=4, limit=2) == (["both-0"], 5)
    assert await ids(offset=9) == ([], 5)
    assert await ids(from_date=T0 + timedelta(minutes=1), to_date=T0 + timedelta(minutes=3)) == (
        ["both-3", "both-2", "both-1"],
        3,
    )


async def test_a_run_leaves_the_suspended_index_when_it_resumes_or_ends(store: Store):
    state = suspended("r1", T0)
    await store.create_run(state)
    state.status = "running"
    state.calls = []
    await store.save_run(state, expected_version=1)
    assert (await store.list_suspended_runs(SuspendedRunQuery(agent_id="a")))[1] == 0
    assert await store.list_running_runs("a") == ["r1"]
    await store.delete_run("r1")
    assert await store.list_running_runs("a") == []


async def test_thread_messages_append_in_order(store: Store):
    await store.append_messages("t1", "u1", [{"role": "user", "content": "a"}])
    await store.append_messages("t1", "u1", [{"role": "assistant", "content": "b"}])
    await store.append_messages("t2", "u1", [{"role": "user", "content": "other"}])

    assert [m["content"] for m in await store.load_messages("t1")] == ["a", "b"]
    assert await store.load_messages("none") == []


def test_paging_arguments_are_checked():
    assert SuspendedRunQuery.paged("a", page=2, per_page=10).offset == 20
    paged = SuspendedRunQuery.paged("a", page=1)
    assert (paged.offset, paged.limit) == (100, 100), "a page without its size has 100 runs"
    for page, per_page in ((-1, 10), (0, 0), (0, -5)):
        with pytest.raises(InvalidPaginationError):
            SuspendedRunQuery.paged("a", page=page, per_page=per_page)


async def test_expiring_runs_are_listed_most_overdue_first(store: Store):
    hour = timedelta(hours=1)
    await store.create_run(suspended("late", T0, expires_at=T0 + 2 * hour))
    await store.create_run(suspended("later", T0, expires_at=T0 + 3 * hour))
    await store.create_run(suspended("never", T0))
    await store.create_run(suspended("other", T0, agent="b", expires_at=T0))
    await store.create_run(suspended("overdue", T0, expires_at=T0 + hour))

    assert await store.list_expiring_runs("a", (T0 + 2 * hour).timestamp()) == ["overdue", "late"]
    assert await store.list_expiring_runs("a", T0.timestamp()) == []


async def test_expiry_is_indexed_only_for_top_level_runs(store: Store):
    from troupe.core.vocabulary.state import ParentLink

    child = suspended(
        "child", T0, expires_at=T0, parent=ParentLink(run_id="p", tool_call_id="c", agent_id="s")
    )
    await store.create_run(child)

    assert await store.list_expiring_runs("a", (T0 + timedelta(days=1)).timestamp()) == []


async def test_a_run_leaves_the_expiry_index_once_decided_or_deleted(store: Store):
    deadline = T0 + timedelta(hours=1)
    await store.create_run(suspended("resumed", T0, expires_at=deadline))
    await store.create_run(suspended("deleted", T0, expires_at=deadline))
    await store.create_run(suspended("re-paused", T0, expires_at=deadline))
    later = (deadline + timedelta(hours=1)).timestamp()
    assert sorted(await store.list_expiring_runs("a", later)) == ["deleted", "re-paused", "resumed"]

    await store.save_run(running("resumed", status="running"), expected_version=1)
    await store.delete_run("deleted", expected_version=1)
    postponed = deadline + timedelta(days=1)
    await store.save_run(suspended("re-paused", T0, expires_at=postponed), expected_version=1)

    assert await store.list_expiring_runs("a", later) == []
    assert await store.list_expiring_runs("a", postponed.timestamp()) == ["re-paused"]


async def test_the_memory_stores_expiry_sweep_parses_no_run(monkeypatch: pytest.MonkeyPatch):
    """The reconciler sweeps for overdue pauses every few seconds: with 20,000 runs paused, parsing each
    stored run per sweep made every approval 1.5x slower."""
    store = MemoryStore()
    await store.create_run(suspended("overdue", T0, expires_at=T0))
    for i in range(3):
        await store.create_run(suspended(f"waiting-{i}", T0))

    def no_parsing(raw: Any) -> RunState:
        raise AssertionError("the sweep parsed a stored run")

    monkeypatch.setattr(RunState, "from_json", no_parsing)
    assert await store.list_expiring_runs("a", (T0 + timedelta(seconds=1)).timestamp()) == ["overdue"]


async def test_heartbeats_expire(store: Store):
    await store.touch_owner("host-1", 60)
    await store.touch_owner("host-2", 0.05)
    await asyncio.sleep(0.1)

    assert await store.live_owners() == {"host-1"}
    await store.touch_owner("host-2", 60)
    assert await store.live_owners() == {"host-1", "host-2"}


async def test_finished_subagent_runs_are_in_no_index(store: Store):
    state = suspended("r1", T0)
    await store.create_run(state)
    state.status, state.calls, state.outcome = "finished", [], {"text": "done"}
    await store.save_run(state, expected_version=1)

    assert (await store.list_suspended_runs(SuspendedRunQuery(agent_id="a")))[1] == 0
    assert await store.list_running_runs("a") == []
    loaded = await store.load_run("r1")
    assert loaded is not None and loaded.state.outcome == {"text": "done"}


async def test_suspended_runs_of_every_agent_can_be_listed_together(store: Store):
    await store.create_run(suspended("a-old", T0))
    await store.create_run(suspended("b-new", T0 + timedelta(hours=1), agent="b"))
    await store.create_run(running("busy"))

    found, total = await store.list_suspended_runs(SuspendedRunQuery(agent_id=None))

    assert [s.run_id for s in found] == ["b-new", "a-old"] and total == 2
    page, total = await store.list_suspended_runs(SuspendedRunQuery(agent_id=None, offset=1, limit=1))
    assert [s.run_id for s in page] == ["a-old"] and total == 2
    with pytest.raises(InvalidPaginationError):
        SuspendedRunQuery.paged(None, page=None, per_page=None, thread_id="t")


async def test_a_thread_belongs_to_the_resource_it_was_started_with(store: Store):
    assert await store.thread_resource("t1") is None
    await store.append_messages("t1", "u1", [{"role": "user", "content": "a"}])
    await store.append_messages("t1", "u2", [{"role": "user", "content": "b"}])
    await store.append_messages("t2", None, [{"role": "user", "content": "c"}])

    assert await store.thread_resource("t1") == "u1"
    assert await store.thread_resource("t2") == ""
    assert [m["content"] for m in await store.load_messages("t1")] == ["a", "b"]


async def test_an_append_of_no_messages_starts_no_thread(store: Store):
    """A thread belongs to the resource of its first message: appending nothing, with a run's write or
    on its own, claims it for no resource."""
    await store.save_run(
        running("r1", thread_id="t1"), expected_version=0, thread=ThreadAppend("t1", "u1", [])
    )
    await store.append_messages("t2", "u1", [])

    assert await store.thread_resource("t1") is None
    assert await store.thread_resource("t2") is None
    await store.append_messages("t1", "u2", [{"role": "user", "content": "a"}])
    assert await store.thread_resource("t1") == "u2"
    assert await store.load_messages("t2") == []


# ---- the notification outbox -----------------------------------------------------------------------------


def delivery(run_id: str, n: int, at: float = 100.0) -> OutboxEntry:
    return OutboxEntry(
        id=f"evt-{run_id}-{n}.hook",
        event_id=f"evt-{run_id}-{n}",
        target="hook",
        run_id=run_id,
        body={"type": "tool-call.paused", "data": {"n": n, "empty": {}}},
        next_at=at,
        created_at=at,
    )


async def test_outbox_entries_are_written_with_the_run_or_not_at_all(store: Store):
    await store.create_run(running("r1"))
    await store.save_run(running("r1"), expected_version=1, outbox=(delivery("r1", 1), delivery("r1", 2)))
    with pytest.raises(StaleSnapshotError):
        await store.save_run(running("r1"), expected_version=1, outbox=(delivery("r1", 3),))
    # The same event written again (a run pausing again with a call still open) adds nothing.
    again = delivery("r1", 1).model_copy(update={"body": {"changed": True}})
    await store.save_run(running("r1"), expected_version=2, outbox=(again,))
    await store.delete_run("r1")

    found = await store.list_deliveries("r1")
    assert [e.event_id for e in found] == ["evt-r1-1", "evt-r1-2"]
    assert found[0].body == {"type": "tool-call.paused", "data": {"n": 1, "empty": {}}}
    assert await store.list_deliveries("other") == []


async def test_due_entries_are_claimed_by_one_host_at_a_time(store: Store):
    await store.create_run(running("r1"))
    entries = tuple(delivery("r1", n, at=100.0 + n) for n in range(6))
    await store.save_run(running("r1"), expected_version=1, outbox=entries)

    assert await store.claim_deliveries("early", now=50.0, lease_s=10, limit=10) == []
    first, second = await asyncio.gather(
        store.claim_deliveries("host-a", now=200.0, lease_s=10, limit=4),
        store.claim_deliveries("host-b", now=200.0, lease_s=10, limit=4),
    )
    ids = [e.id for e in first + second]
    assert sorted(ids) == sorted(e.id for e in entries), "every entry claimed once, none twice"
    assert all(e.lease_owner in ("host-a", "host-b") and e.lease_until == 210.0 for e in first + second)
    assert await store.claim_deliveries("host-c", now=205.0, lease_s=10, limit=10) == []
    # A lease that ran out (its host died mid-send) lets another host take the entry.
    taken = await store.claim_deliveries("host-c", now=211.0, lease_s=10, limit=1)
    assert [e.id for e in taken] == [entries[0].id]


async def test_a_claim_can_take_one_targets_entries_only(store: Store):
    """Each target's lane claims its own entries, so entries of a slow target due first never stand in
    front of another's."""

    def to(target: str, n: int, at: float) -> OutboxEntry:
        entry = delivery("r1", n, at=at)
        return entry.model_copy(update={"id": f"{entry.event_id}.{target}", "target": target})

    await store.create_run(running("r1"))
    slow = [to("slow.hooks", n, at=100.0 + n) for n in range(5)]
    chat = [to("chat", n, at=200.0 + n) for n in range(3)]
    await store.save_run(running("r1"), expected_version=1, outbox=(*slow, *chat))

    taken = await store.claim_deliveries("host-a", now=300.0, lease_s=10, limit=2, target="chat")
    assert [e.id for e in taken] == [chat[0].id, chat[1].id], "the target's soonest, past the others"
    assert all(e.lease_owner == "host-a" for e in taken)
    assert await store.claim_deliveries("host-a", now=300.0, lease_s=10, limit=9, target="hooks") == []
    rest = await store.claim_deliveries("host-b", now=300.0, lease_s=10, limit=9, target="chat")
    assert [e.id for e in rest] == [chat[2].id]
    # Looked at by another lane first, its entries are still claimed as they always were.
    assert [e.id for e in await store.claim_deliveries("host-c", now=300.0, lease_s=10, limit=9)] == [
        e.id for e in slow
    ]


async def test_a_settled_attempt_sets_the_next_one_and_a_lost_lease_writes_nothing(store: Store):
    await store.create_run(running("r1"))
    await store.save_run(running("r1"), expected_version=1, outbox=(delivery("r1", 1),))
    (claimed,) = await store.claim_deliveries("host-a", now=100.0, lease_s=10, limit=5)

    retry = claimed.model_copy(update={"attempts": 1, "next_at": 150.0, "last_error": "HTTP 503"})
    assert await store.settle_delivery(retry)
    assert await store.claim_deliveries("host-b", now=149.0, lease_s=10, limit=5) == []
    (again,) = await store.claim_deliveries("host-b", now=150.0, lease_s=10, limit=5)
    assert again.attempts == 1 and again.last_error == "HTTP 503"

    stale = retry.model_copy(update={"status": "delivered"})  # host-a's lease is gone: refused
    assert not await store.settle_delivery(stale)
    assert await store.settle_delivery(again.model_copy(update={"status": "delivered", "attempts": 2}))
    assert await store.claim_deliveries("host-c", now=10_000.0, lease_s=10, limit=5) == []
    (shown,) = await store.list_deliveries("r1")
    assert (shown.status, shown.attempts, shown.lease_owner) == ("delivered", 2, None)


async def test_a_delivery_can_be_sent_again(store: Store):
    await store.create_run(running("r1"))
    await store.save_run(running("r1"), expected_version=1, outbox=(delivery("r1", 1),))
    (claimed,) = await store.claim_deliveries("host-a", now=100.0, lease_s=10, limit=5)

    again = await store.redeliver(claimed.id, now=101.0)

    assert again is not None and (again.status, again.attempts, again.lease_owner) == ("pending", 0, None)
    assert not await store.settle_delivery(claimed.model_copy(update={"status": "failed"}))
    assert [e.id for e in await store.claim_deliveries("host-b", now=101.0, lease_s=10, limit=5)] == [
        claimed.id
    ]
    assert await store.redeliver("missing", now=1.0) is None


async def settle(store: Store, entry: OutboxEntry, status: str, at: float) -> None:
    """Claim ``entry`` at ``at`` and settle it as ``status`` (delivered then, or failed)."""
    claimed = await store.claim_deliveries("host-a", now=at, lease_s=10, limit=1)
    assert [e.id for e in claimed] == [entry.id]
    update: dict[str, Any] = {"status": status, "attempts": 1}
    if status == "delivered":
        update["delivered_at"] = at
    assert await store.settle_delivery(claimed[0].model_copy(update=update))


async def test_deliveries_of_finished_runs_are_pruned_once_delivered_long_enough(store: Store):
    for run_id in ("r1", "r2"):
        await store.create_run(running(run_id))
    # r1: delivered at 100, 200 and 300, one failed, one still pending; r2: delivered at 150.
    r1 = [delivery("r1", n, at=float(n)) for n in range(4)] + [delivery("r1", 4, at=390.0)]
    r2 = delivery("r2", 0, at=5.0)
    await store.save_run(running("r1"), expected_version=1, outbox=tuple(r1))
    await store.save_run(running("r2"), expected_version=1, outbox=(r2,))
    await settle(store, r1[0], "delivered", 100.0)
    await settle(store, r1[1], "delivered", 200.0)
    await settle(store, r1[2], "failed", 250.0)
    await settle(store, r1[3], "delivered", 300.0)
    await settle(store, r2, "delivered", 150.0)
    # Delivered at 300, then sent again: pending, so kept whatever its old delivery time.
    assert await store.redeliver(r1[3].id, now=310.0) is not None
    await store.delete_run("r2")

    assert await store.prune_deliveries(now=199.0, keep_s=100.0, limit=10) == 0, "none delivered by 99"
    # Delivered by 200: r2's goes; r1's two stay while r1 lives, and are looked at again from 10,000.
    assert await store.prune_deliveries(now=10_000.0, keep_s=9_800.0, limit=10) == 1
    assert await store.list_deliveries("r2") == []
    assert [e.id for e in await store.list_deliveries("r1")] == [e.id for e in r1]
    # With nothing kept back by age, a live run's entries are still kept (and looked at once per call).
    assert await store.prune_deliveries(now=10_000.0, keep_s=0.0, limit=10) == 0
    assert len(await store.list_deliveries("r1")) == len(r1)

    await store.delete_run("r1")
    assert await store.prune_deliveries(now=10_000.0, keep_s=9_800.0, limit=10) == 0
    assert await store.prune_deliveries(now=19_800.0, keep_s=9_800.0, limit=1) == 1, "up to the limit"
    assert await store.prune_deliveries(now=19_800.0, keep_s=9_800.0, limit=10) == 1
    assert await store.prune_deliveries(now=19_800.0, keep_s=9_800.0, limit=10) == 0

    left = {e.id: e.status for e in await store.list_deliveries("r1")}
    assert left == {r1[2].id: "failed", r1[3].id: "pending", r1[4].id: "pending"}
    # What is left still works: the redelivered entry is claimed and, delivered again, pruned in its turn.
    claimed = await store.claim_deliveries("host-b", now=20_000.0, lease_s=10, limit=5)
    assert sorted(e.id for e in claimed) == sorted([r1[3].id, r1[4].id])
    for entry in claimed:
        assert await store.settle_delivery(
            entry.model_copy(update={"status": "delivered", "delivered_at": 20_001.0})
        )
    assert await store.prune_deliveries(now=20_001.5, keep_s=1.0, limit=10) == 0
    assert await store.prune_deliveries(now=20_002.0, keep_s=1.0, limit=10) == 2
    assert [e.id for e in await store.list_deliveries("r1")] == [r1[2].id]


async def test_a_delivery_sent_again_is_kept_from_its_latest_delivery(store: Store):
    await store.create_run(running("r1"))
    entry = delivery("r1", 1, at=1.0)
    await store.save_run(running("r1"), expected_version=1, outbox=(entry,))
    await settle(store, entry, "delivered", 100.0)
    assert await store.redeliver(entry.id, now=110.0) is not None
    await settle(store, entry, "delivered", 500.0)
    await store.delete_run("r1")

    assert await store.prune_deliveries(now=300.0, keep_s=0.0, limit=10) == 0, "delivered at 500 now"
    assert [e.delivered_at for e in await store.list_deliveries("r1")] == [500.0]
    assert await store.prune_deliveries(now=500.0, keep_s=0.0, limit=10) == 1


# ---- decision links' records ------------------------------------------------------------------------


def link(link_id: str = "L1", expires_at: float = 2e9, **fields: Any) -> LinkRecord:
    return LinkRecord(
        id=link_id,
        action="approve",
        agent_id="a",
        run_id="r1",
        tool_call_id="c1",
        fingerprint="f" * 32,
        expires_at=expires_at,
        **fields,
    )


async def test_a_link_record_is_kept_once_and_read_back(store: Store):
    dana = {"issuer": "troupe", "subject": "dana", "name": "Dana", "roles": ["dba"]}
    issued = link(approver=dana, channel="ops-chat", created_at=1_000.5)
    assert await store.issue_link(issued) == issued
    # Issued again (a retried delivery): the first record stands, whatever the second says.
    assert await store.issue_link(link(channel="elsewhere")) == issued
    assert await store.load_link("L1") == issued
    assert await store.load_link("missing") is None


async def test_a_link_is_used_once_per_principal_and_never_after_it_expired(store: Store):
    # Real epoch times: Redis forgets a record by its own clock, a day after it expired.
    end = time.time() + 600
    await store.issue_link(link(expires_at=end))
    used = await store.use_link("L1", "alice@troupe", now=end - 10)
    assert used is not None and used.used_by == ["alice@troupe"]
    assert await store.use_link("L1", "alice@troupe", now=end - 10) is None, "alice used it already"
    bob = await store.use_link("L1", "bob@troupe", now=end - 5)
    assert bob is not None and bob.used_by == ["alice@troupe", "bob@troupe"]
    assert await store.use_link("L1", "carol@troupe", now=end) is None, "expired"
    assert await store.use_link("missing", "carol@troupe", now=end - 10) is None
    loaded = await store.load_link("L1")
    assert loaded is not None and loaded.used_by == ["alice@troupe", "bob@troupe"]

    await store.release_link("L1", "alice@troupe")  # alice's decision was refused: not used after all
    await store.release_link("L1", "nobody@troupe")
    await store.release_link("missing", "alice@troupe")
    loaded = await store.load_link("L1")
    assert loaded is not None and loaded.used_by == ["bob@troupe"]
    again = await store.use_link("L1", "alice@troupe", now=end - 1)
    assert again is not None and again.used_by == ["bob@troupe", "alice@troupe"]


async def test_concurrent_uses_of_a_link_by_one_principal_have_one_winner(store: Store):
    await store.issue_link(link())
    now = time.time()
    uses = await asyncio.gather(*(store.use_link("L1", "alice@troupe", now=now) for _ in range(8)))
    assert sum(u is not None for u in uses) == 1


async def test_a_link_past_forgetting_is_gone(store: Store):
    """A record is kept a day (``LINK_KEPT_S``) after it expires, so its link can say it expired; after
    that a store may delete it (the durable ones do, by the next issue or by themselves)."""
    now = time.time()
    await store.issue_link(link("old", expires_at=now - LINK_KEPT_S - 1))
    await store.issue_link(link("new", expires_at=now + 60))
    assert await store.load_link("old") is None
    assert await store.load_link("new") is not None


# ---- paged listings (troupe.core.vocabulary.listing: the spec) ---------------------------------------------


def waiting(
    run_id: str,
    minutes: float,
    agent: str = "a",
    roles: list[str] | None = None,
    child: bool = False,
    **fields: Any,
) -> RunState:
    """A run paused ``minutes`` after T0, its approval governed by a policy naming ``roles``; a subagent's
    run (not top-level) with ``child``."""
    state = suspended(run_id, T0 + timedelta(minutes=minutes), agent=agent, **fields)
    state.calls[0].pauses[0].roles = roles
    if child:
        state.parent = ParentLink(run_id="parent", tool_call_id="d1", agent_id="sup")
    return state


async def page_ids(store: Store, **query: Any) -> tuple[list[str], int, str | None]:
    page = await store.list_paused(PausedQuery(**query))
    return [s.run_id for s in page.states], page.total, page.next_cursor


async def every_page(store: Store, **query: Any) -> list[str]:
    """The listing read a page at a time, each page from the cursor of the one before."""
    found: list[str] = []
    cursor = query.pop("cursor", None)
    for _ in range(100):  # a cursor that stops moving would go on for ever
        ids, _, cursor = await page_ids(store, **query, cursor=cursor)
        found += ids
        if cursor is None:
            return found
    raise AssertionError(f"100 pages and the cursor goes on; shown so far: {found[:20]}")


async def test_a_paused_run_this_troupe_cannot_read_is_left_out_of_the_page_not_the_end_of_it(store: Store):
    """A run written by a newer Troupe sharing the store (as in a rolling upgrade) made every listing of
    the store fail, the inbox included; it is left out of the page it falls in, and still counted."""
    for run_id, minutes in (("r1", 0), ("r2", 1), ("r3", 2)):
        state = waiting(run_id, minutes)
        if run_id == "r2":
            state.schema_version = 99
        await store.create_run(state)
    assert await page_ids(store) == (["r1", "r3"], 3, None)
    first, total, cursor = await page_ids(store, limit=2)
    assert (first, total) == (["r1"], 3) and cursor is not None
    assert (await page_ids(store, limit=2, cursor=cursor))[0] == ["r3"]


async def test_a_listing_is_read_a_page_at_a_time_in_a_stable_order(store: Store):
    # Runs paused at the same time are ordered by id, whichever way the listing goes.
    at = {"r3": 0, "r1": 0, "r5": 1, "r6": 2, "r2": 2, "r4": 2, "r0": 3}
    for run_id, minutes in at.items():
        await store.create_run(waiting(run_id, minutes))
    await store.create_run(running("busy"))
    oldest = ["r1", "r3", "r5", "r2", "r4", "r6", "r0"]
    newest = ["r0", "r2", "r4", "r6", "r5", "r1", "r3"]

    for order, expected in (("oldest", oldest), ("newest", newest)):
        for size in (1, 2, 3, 7, 100):
            assert await every_page(store, order=order, limit=size) == expected, (order, size)
        first = await page_ids(store, order=order, limit=3)
        assert first[:2] == (expected[:3], 7) and first[2] is not None
        assert (await page_ids(store, order=order, limit=7))[2] is None, "the last page has no cursor"
        assert (await page_ids(store, order=order, limit=2, offset=3))[0] == expected[3:5]
    follow = await page_ids(store, order="newest", limit=2, offset=3)
    assert (await page_ids(store, order="newest", limit=3, cursor=follow[2]))[0] == newest[5:]


async def test_a_cursor_keeps_pause_times_to_the_microsecond(store: Store):
    # Real pause times carry microseconds: a cursor that rounded its place (Redis's Lua formats a number
    # with 14 digits, 100 µs at today's epoch) would seek to a place beside its run, and the next page
    # would show runs again, or never move past a run with one per page.
    base = datetime(2026, 12, 7, 18, 42, 13, 531853, tzinfo=UTC)
    at = {f"r{i}": base + timedelta(microseconds=37 * i) for i in range(6)}
    for run_id, paused_at in at.items():
        await store.create_run(suspended(run_id, paused_at))
    oldest = sorted(at, key=at.__getitem__)
    for order, expected in (("oldest", oldest), ("newest", oldest[::-1])):
        for size in (1, 2, 4):
            assert await every_page(store, order=order, limit=size) == expected, (order, size)


async def test_a_cursor_keeps_its_place_while_runs_come_and_go(store: Store):
    for i in range(10):
        await store.create_run(waiting(f"r{i:02d}", i))
    ids, total, cursor = await page_ids(store, limit=4)
    assert (ids, total) == (["r00", "r01", "r02", "r03"], 10)
    # Runs leave before the cursor's place, at it (the run it names) and after it; runs arrive after it
    # and (a clock behind the others) before it; one resumes and leaves.
    await store.delete_run("r01")
    await store.delete_run("r03")
    await store.delete_run("r05")
    await store.save_run(running("r07", status="running"), expected_version=1)
    await store.create_run(waiting("late", 30))
    await store.create_run(waiting("early", -1))

    rest = await page_ids(store, limit=3, cursor=cursor)
    assert rest[:2] == (["r04", "r06", "r08"], 8), "nothing skipped, nothing shown twice"
    assert await page_ids(store, limit=3, cursor=rest[2]) == (["r09", "late"], 8, None)
    # The other way: the newest first, from the place of a run that is gone since.
    ids, _, cursor = await page_ids(store, order="newest", limit=2)
    assert ids == ["late", "r09"]
    await store.delete_run("r09")
    await store.delete_run("r08")
    assert await every_page(store, order="newest", limit=2, cursor=cursor) == [
        "r06",
        "r04",
        "r02",
        "r00",
        "early",
    ]


async def test_listings_filter_by_agent_resource_thread_top_level_role_and_age(store: Store):
    runs = [
        waiting("a1", 0, resource_id="u1", thread_id="t1", roles=["finance"]),
        waiting("a2", 1, resource_id="u2", thread_id="t1"),
        waiting("a3", 2, resource_id="u1", thread_id="t2", child=True),
        waiting("b1", 3, agent="b", resource_id="u1", roles=["finance", "ops"]),
        waiting("b2", 4, agent="b"),
    ]
    for state in runs:
        await store.create_run(state)
    await store.create_run(running("c1", agent="a", resource_id="u1"))

    async def listed(**query: Any) -> tuple[list[str], int]:
        ids, total, _ = await page_ids(store, **query)
        assert await every_page(store, **query, limit=1) == ids, "the same read a page of one at a time"
        return ids, total

    both = ("a", "b")
    assert await listed() == (["a1", "a2", "a3", "b1", "b2"], 5)
    assert await listed(agents=("a",)) == (["a1", "a2", "a3"], 3)
    assert await listed(top_level=True) == (["a1", "a2", "b1", "b2"], 4)
    assert await listed(agents=("a",), top_level=True) == (["a1", "a2"], 2)
    assert await listed(agents=both, top_level=True, resources=("u1",)) == (["a1", "b1"], 2)
    assert await listed(agents=both, top_level=True, resources=("u1", "u2")) == (["a1", "a2", "b1"], 3)
    assert await listed(agents=("a",), resources=("u1",)) == (["a1", "a3"], 2)
    assert await listed(agents=("a",), thread_id="t1") == (["a1", "a2"], 2)
    assert await listed(agents=("a",), thread_id="t1", resources=("u2",)) == (["a2"], 1)
    assert await listed(agents=both, top_level=True, role="finance") == (["a1", "b1"], 2)
    assert await listed(agents=both, top_level=True, role="ops") == (["b1"], 1)
    assert await listed(agents=both, top_level=True, role="finance", resources=("u2",)) == ([], 0)
    minute = timedelta(minutes=1)
    assert await listed(from_date=T0 + minute, to_date=T0 + 3 * minute) == (["a2", "a3", "b1"], 3)
    assert await listed(agents=both, top_level=True, from_date=T0 + 2 * minute) == (["b1", "b2"], 2)
    assert await listed(agents=("a",), thread_id="t1", to_date=T0) == (["a1"], 1)
    assert await listed(agents=(), top_level=True) == ([], 0)
    assert await listed(agents=both, top_level=True, resources=()) == ([], 0), "a key with no resources"
    # A range that ends before it starts lists nothing, and counts nothing.
    assert await listed(from_date=T0 + 3 * minute, to_date=T0 + minute) == ([], 0)
    assert await listed(agents=("a",), thread_id="t1", from_date=T0 + minute, to_date=T0) == ([], 0)
    backwards = SuspendedRunQuery(agent_id="a", from_date=T0 + 2 * minute, to_date=T0)
    assert await store.list_suspended_runs(backwards) == ([], 0)
    for wrong in (
        {"resources": ("u1",)},
        {"agents": both, "thread_id": "t1"},
        {"agents": ("a",), "thread_id": "t1", "top_level": True},
        {"agents": ("a",), "role": "ops"},
        {"limit": 0},
        {"limit": 1001},
        {"offset": -1},
        {"order": "random"},
    ):
        with pytest.raises(InvalidPaginationError):
            PausedQuery(**wrong)


async def test_a_cursor_is_bound_to_its_listing_and_checked(store: Store):
    for i in range(3):
        await store.create_run(waiting(f"r{i}", i))
    _, _, cursor = await page_ids(store, agents=("a",), limit=1)
    assert cursor is not None
    for other in ({"agents": ("b",)}, {"agents": ("a",), "order": "newest"}, {"top_level": True}):
        with pytest.raises(InvalidPaginationError, match="other filters"):
            PausedQuery(**other, cursor=cursor)
    assert (await page_ids(store, agents=("a",), limit=5, cursor=cursor))[0] == ["r1", "r2"]
    with pytest.raises(InvalidPaginationError):
        PausedQuery(agents=("a",), cursor=cursor, offset=1)
    for damaged in ("", "x" * 5000, "c1.!!!", "c1." + "e30", cursor[:-3], 17):
        with pytest.raises(InvalidPaginationError):
            PausedQuery(agents=("a",), cursor=damaged)  # type: ignore[arg-type]


async def test_totals_follow_every_write(store: Store):
    """The total of each listing after every kind of write (SQLite keeps counters for them)."""
    queries: list[dict[str, Any]] = [
        {},
        {"top_level": True},
        {"agents": ("a",)},
        {"agents": ("a",), "resources": ("u1",)},
        {"agents": ("a",), "top_level": True},
        {"agents": ("a",), "top_level": True, "resources": ("u1",)},
        {"agents": ("a",), "top_level": True, "role": "ops"},
        {"agents": ("a",), "top_level": True, "role": "ops", "resources": ("u1",)},
        {"agents": ("a",), "thread_id": "t1"},
    ]

    async def check() -> None:
        for query in queries:
            ids, total, _ = await page_ids(store, **query)
            assert total == len(ids) == len(await every_page(store, **query, limit=1)), query

    await store.create_run(waiting("r1", 0, resource_id="u1", thread_id="t1", roles=["ops"]))
    await store.create_run(waiting("r2", 1, resource_id="u1", child=True))
    await check()
    assert (await page_ids(store, agents=("a",), top_level=True, role="ops"))[1] == 1
    # An approval short of its quorum saves the run still paused: counted once.
    await store.save_run(
        waiting("r1", 0, resource_id="u1", thread_id="t1", roles=["ops"]), expected_version=1
    )
    await check()
    await store.save_run(
        running("r1", status="running", resource_id="u1", thread_id="t1"), expected_version=2
    )
    await check()
    assert (await page_ids(store, agents=("a",), top_level=True))[1] == 0
    # Paused again, elsewhere: it moves from one resource's count to another's.
    again = waiting("r1", 5, resource_id="u2", thread_id="t1", roles=["ops", "finance"])
    await store.save_run(again, expected_version=3)
    await check()
    assert (await page_ids(store, agents=("a",), resources=("u1",)))[1] == 1
    await store.delete_run("r1")
    await store.delete_run("r2")
    await check()
    assert (await page_ids(store))[1] == 0


async def test_the_change_log_says_what_entered_changed_and_left_the_listings(store: Store):
    start = await store.paused_changes(None, 100)
    assert start.changes == [] and start.complete
    await store.create_run(waiting("r1", 0, resource_id="u1"))
    await store.create_run(running("r2"))  # not listed: not logged
    await store.save_run(waiting("r1", 0, resource_id="u1"), expected_version=1)  # changed, still listed
    await store.save_run(waiting("r2", 1, child=True), expected_version=1)
    await store.save_run(running("r1", status="running"), expected_version=2)
    await store.delete_run("r2")
    await store.delete_run("r1")  # not listed any more: nothing to log

    read = await store.paused_changes(start.position, 100)
    by_run: dict[str, list[tuple[bool, str | None, bool]]] = {}
    for change in read.changes:
        assert change.agent_id == "a"
        by_run.setdefault(change.run_id, []).append((change.listed, change.resource_id, change.top_level))
    # Each run's changes in order (on Redis Cluster two runs may live in two shards, each its own log).
    assert by_run == {
        "r1": [(True, "u1", True), (True, "u1", True), (False, "u1", True)],
        "r2": [(True, None, False), (False, None, False)],
    }
    assert read.complete and (await store.paused_changes(read.position, 100)).changes == []
    # A small limit reads the same log a few entries at a time.
    position, seen = start.position, []
    while True:
        part = await store.paused_changes(position, 2)
        assert len(part.changes) <= 2
        if not part.changes:
            break
        seen += part.changes
        position = part.position
    assert sorted(seen, key=repr) == sorted(read.changes, key=repr)
    with pytest.raises(InvalidPaginationError):
        await store.paused_changes("not a position", 10)


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=REDIS)])
async def one_store(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Store]:
    """One store of each kind (one Redis server: a cluster's log is per shard, ten thousand each)."""
    backend = backend_of(request, tmp_path)
    yield backend
    await backend.close()


async def test_a_reader_further_behind_than_the_change_log_keeps_is_told(one_store: Store):
    store = one_store
    start = await store.paused_changes(None, 10)
    for first in range(0, KEEP_CHANGES + 250, 500):
        batch = range(first, min(first + 500, KEEP_CHANGES + 250))
        await asyncio.gather(*(store.create_run(waiting(f"r{i}", i / 1000)) for i in batch))
    behind = await store.paused_changes(start.position, 10)
    assert (behind.changes, behind.complete) == ([], False)
    # Reading on from the position it gives (the end, where the listing is read again) works.
    await store.create_run(waiting("next", 0))
    after = await store.paused_changes(behind.position, 10)
    assert after.complete and [c.run_id for c in after.changes] == ["next"]


@pytest.fixture(params=EVERY_STORE)
async def two_stores(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[tuple[Store, Store]]:
    """Two stores of one kind, apart."""
    stores = backend_of(request, tmp_path), backend_of(request, tmp_path, "other")
    yield stores
    for backend in stores:
        await backend.close()


async def test_a_position_past_the_end_of_the_change_log_is_not_taken_for_a_complete_read(
    two_stores: tuple[Store, Store],
):
    """A reader holding a position this log never reached (it read a store that was replaced by a new
    one) is told to read the listing again, and given the log's end to read on from: kept, its position
    would skip every change until the log got that far."""
    store, ahead = two_stores
    for i in range(3):
        await ahead.create_run(waiting(f"r{i}", i))
    future = (await ahead.paused_changes(None, 10)).position
    start = await store.paused_changes(None, 10)

    told = await store.paused_changes(future, 10)

    assert (told.changes, told.complete) == ([], False)
    assert told.position == start.position, "the end of this store's own log"
    await store.create_run(waiting("next", 0))
    after = await store.paused_changes(told.position, 10)
    assert after.complete and [c.run_id for c in after.changes] == ["next"]
