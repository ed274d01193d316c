"""RedisStore on a real three-master Redis Cluster (the conformance suite runs there too): the keys of a
run share one hash slot, runs spread over the masters, listings gather every master's runs, and a
supervisor's approval routes down to a subagent's gated tool with everything stored on the cluster."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from helpers import chunks_of
from redis_cluster import RedisClusterNodes
from test_store_conformance import running, suspended
from trees import two_levels
from troupe.core.run.delegation import child_run_id
from troupe.core.vocabulary.store import AuditEntry, OutboxEntry, SuspendedRunQuery, ThreadAppend
from troupe.storage import RedisStore

from troupe import Runtime
from troupe.cli import main
from troupe.errors import DuplicateRunError
from troupe.testing import CallLog

pytestmark = pytest.mark.redis

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def masters(redis_cluster: RedisClusterNodes) -> Any:
    clients = redis_cluster.masters()
    yield clients
    for client in clients:
        client.close()


@pytest.fixture
async def store(redis_cluster: RedisClusterNodes, redis_prefix: str) -> AsyncIterator[RedisStore]:
    backend = RedisStore.from_url(redis_cluster.url, prefix=redis_prefix)
    yield backend
    await backend.close()


def keys_on(master: redis.Redis, prefix: str) -> set[str]:
    return set(master.scan_iter(match=f"{prefix}*"))


def slot_of(masters: list[redis.Redis], key: str) -> int:
    return int(masters[0].cluster("keyslot", key))


def run_keys(masters: list[redis.Redis], prefix: str, run_id: str) -> set[str]:
    """Every key a run has on the cluster: found by name on every master, plus the indexes its hash
    says it is in (a pointer to its shard, ``home:``, is the id's directory entry, not the run's)."""
    found: set[str] = set()
    for master in masters:
        named = {k for k in keys_on(master, prefix) if k.endswith(f":{run_id}") and ":home:" not in k}
        indexes = [master.hget(key, "indexes") for key in named if ":run:" in key]
        found |= named | {index for held in indexes if held for index in json.loads(held)}
    return found


async def test_a_supervisor_approval_on_the_cluster_keeps_each_runs_keys_in_one_slot(
    store: RedisStore, masters: list[redis.Redis], redis_prefix: str, calls: CallLog, executor: str
):
    # On Ray each agent actor unpickles the store and opens its own cluster client.
    sup = two_levels(calls)
    runtime = Runtime([sup], storage=store, executor=executor)
    try:
        stream = await sup.stream("please delete u1")
        [approval] = [c for c in await chunks_of(stream) if c.type == "tool-call-approval"]
        top, child = stream.run_id, child_run_id(stream.run_id, "d1")
        assert approval.payload["agent_path"] == ["sup", "data"] and calls.count() == 0
        listed = await sup.list_suspended_runs()
        assert [r.run_id for r in listed.runs] == [top]
        for run_id in (top, child):
            keys = run_keys(masters, redis_prefix, run_id)
            assert any(":suspended:" in key for key in keys), keys  # its indexes are among them
            assert len({slot_of(masters, key) for key in keys}) == 1, keys

        result = await sup.approve_tool_call_generate(run_id=top, tool_call_id="d1")

        assert result.text == 'sup: d1=leaf-1={"deleted": "u1"}'
        assert calls.count("delete_record") == 1
        assert [e.kind for e in await store.list_audit(top)] == ["approved"]
        left = run_keys(masters, redis_prefix, top)  # the tombstone and the audit list
        assert {key.rsplit(":", 2)[-2] for key in left} == {"run", "audit"}
        assert len({slot_of(masters, key) for key in left}) == 1
    finally:
        await runtime.shutdown()


def delivery(run_id: str, at: float) -> OutboxEntry:
    return OutboxEntry(
        id=f"evt-{run_id}.hook", event_id=f"evt-{run_id}", target="hook", run_id=run_id, body={}, next_at=at
    )


async def test_runs_spread_over_the_masters_and_every_listing_gathers_them_all(
    store: RedisStore, masters: list[redis.Redis], redis_prefix: str
):
    ids = [f"run-{n:02d}" for n in range(12)]
    for n, run_id in enumerate(ids):
        await store.create_run(
            suspended(run_id, T0 + timedelta(minutes=n), expires_at=T0 + timedelta(days=n))
        )
        await store.save_run(
            suspended(run_id, T0 + timedelta(minutes=n)),
            expected_version=1,
            outbox=(delivery(run_id, 100.0 + n),),
        )

    holding = [m for m in masters if any(":run:" in key for key in keys_on(m, redis_prefix))]
    assert len(holding) > 1, "all runs on one master: the cluster would not spread the load"

    newest_first = ids[::-1]
    found, total = await store.list_suspended_runs(SuspendedRunQuery(agent_id="a"))
    assert ([s.run_id for s in found], total) == (newest_first, 12)
    page, total = await store.list_suspended_runs(SuspendedRunQuery(agent_id=None, offset=3, limit=4))
    assert ([s.run_id for s in page], total) == (newest_first[3:7], 12)
    later = T0 + timedelta(minutes=8, seconds=30)
    found, total = await store.list_suspended_runs(SuspendedRunQuery(agent_id="a", from_date=later))
    assert ([s.run_id for s in found], total) == (newest_first[:3], 3)
    assert await store.list_expiring_runs("a", (T0 + timedelta(days=20)).timestamp()) == []
    # The second save dropped the deadlines; a running run of each shard is found again by recovery.
    for run_id in ids[:6]:
        await store.save_run(running(run_id), expected_version=2)
    assert await store.list_running_runs("a") == ids[:6]

    claimed = await store.claim_deliveries("host-a", now=105.0, lease_s=10, limit=4)
    assert [e.run_id for e in claimed] == ids[:4], "the soonest due of all shards, soonest first"
    again = await store.redeliver(f"evt-{ids[11]}.hook", now=106.0)
    assert again is not None and again.run_id == ids[11]
    claimed = await store.claim_deliveries("host-b", now=106.0, lease_s=10, limit=9)
    assert [e.run_id for e in claimed] == [ids[4], ids[5], ids[6], ids[11]]


async def test_a_run_on_a_thread_lives_with_its_thread_and_is_found_by_id_alone(
    store: RedisStore, redis_cluster: RedisClusterNodes, redis_prefix: str
):
    # A run whose id and thread fall in different shards: its write appends to the thread atomically.
    run_id = next(
        f"run-{n}" for n in range(100) if store.layout.own(f"run-{n}") is not store.layout.of_thread("t1")
    )
    await store.create_run(running(run_id, thread_id="t1", resource_id="u1"))
    said = ThreadAppend("t1", "u1", [{"role": "user", "content": "hello"}])
    await store.save_run(running(run_id, thread_id="t1", resource_id="u1"), expected_version=1, thread=said)

    fresh = RedisStore.from_url(redis_cluster.url, prefix=redis_prefix)  # nothing remembered yet
    try:
        loaded = await fresh.load_run(run_id)
        assert loaded is not None and loaded.version == 2
        await fresh.delete_run(
            run_id, thread=ThreadAppend("t1", "u1", [{"role": "assistant", "content": "bye"}])
        )
        assert [m["content"] for m in await fresh.load_messages("t1")] == ["hello", "bye"]
        assert await fresh.thread_resource("t1") == "u1"
        # The id stays taken, with or without a thread, in its thread's shard or in its own.
        for again in (running(run_id), running(run_id, thread_id="t1"), running(run_id, thread_id="t2")):
            with pytest.raises(DuplicateRunError):
                await fresh.create_run(again)
        assert await fresh.load_run(run_id) is None
    finally:
        await fresh.close()


async def test_writes_that_would_leave_the_runs_shard_are_refused(store: RedisStore):
    # A braced prefix (the old advice for clusters) would pin every shard's keys to one slot.
    with pytest.raises(ValueError, match="has a brace"):
        RedisStore.from_url(store.url, prefix="{troupe}:")
    state = running("r1", thread_id="t1")
    await store.create_run(state)
    other = next(
        f"t{n}" for n in range(2, 100) if store.layout.of_thread(f"t{n}") is not store.layout.home(state)
    )
    with pytest.raises(ValueError, match="is not the thread of run r1"):
        await store.save_run(state, expected_version=1, thread=ThreadAppend(other, None, [{"role": "user"}]))
    stray = AuditEntry(
        run_id="r2", agent_id="a", tool_call_id="c", tool_name="t", args={}, fingerprint="f", kind="approved"
    )
    with pytest.raises(ValueError, match="cannot be written with run r1"):
        await store.save_run(state, expected_version=1, audit=(stray,))
    loaded = await store.load_run("r1")
    assert loaded is not None and loaded.version == 1


@pytest.mark.parametrize("setup", ["redis_cluster", "redis_sentinel"])
async def test_the_operator_cli_reads_a_store_on_a_cluster_or_through_sentinel(
    setup: str, request: pytest.FixtureRequest, redis_prefix: str, calls: CallLog, capsys
):
    found = request.getfixturevalue(setup)
    sup = two_levels(calls)
    runtime = Runtime([sup], storage=RedisStore.from_url(found.url, prefix=redis_prefix), executor="local")
    try:
        run_id = (await sup.generate("please delete u1")).run_id
    finally:
        await runtime.shutdown()

    where = ["--store", found.url, "--prefix", redis_prefix]
    assert await asyncio.to_thread(main, ["runs", "list", *where]) == 0
    listed = capsys.readouterr().out
    assert run_id in listed and "delete_record" in listed
    assert found.password not in listed


async def test_a_new_stores_first_call_may_be_a_listing_of_every_shard_at_once(
    store: RedisStore, redis_cluster: RedisClusterNodes, redis_prefix: str
):
    await store.create_run(suspended("r1", T0))
    # Each new store (a CLI command, a new process) sends one command per shard at once as its first
    # act; redis-py's cluster client failed some of them unless it had learnt the layout first.
    for _ in range(8):
        fresh = RedisStore.from_url(redis_cluster.url, prefix=redis_prefix)
        try:
            found, total = await fresh.list_suspended_runs(SuspendedRunQuery(agent_id="a"))
        finally:
            await fresh.close()
        assert ([s.run_id for s in found], total) == (["r1"], 1)
