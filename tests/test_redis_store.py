"""What only RedisStore has to get right: its keys, its event loops, its pickling and its reconnects.

The Store semantics themselves are held by the conformance suite (test_store_conformance.py).
"""

from __future__ import annotations

import asyncio
import gc
import json
import pickle
import time
import warnings
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis.asyncio
import troupe.storage.redis as redis_store_module
from redis_server import RedisServer, free_port
from troupe.core.vocabulary.listing import PausedQuery
from troupe.core.vocabulary.state import CallStatus, Pause, RunState, ToolCallState
from troupe.core.vocabulary.store import AuditEntry, StaleSnapshotError, SuspendedRunQuery
from troupe.storage import RedisStore

from troupe.errors import DuplicateRunError, StorageUnavailableError

pytestmark = pytest.mark.redis

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def store(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisStore]:
    backend = RedisStore(redis_url, prefix=redis_prefix)
    yield backend
    await backend.close()


async def keys_under(url: str, prefix: str) -> set[str]:
    client = redis.asyncio.Redis.from_url(url, decode_responses=True)
    try:
        return {key async for key in client.scan_iter(match=f"{prefix}*")}
    finally:
        await client.aclose()


def paused(run_id: str, agent: str = "a", **fields: Any) -> RunState:
    pause = Pause(
        kind="approval", tool_name="t", args={}, agent_path=[agent], fingerprint="f" * 32, paused_at=T0, seq=1
    )
    call = ToolCallState(
        tool_call_id="c1", tool_name="t", args={}, status=CallStatus.AWAITING_APPROVAL, pauses=[pause]
    )
    return RunState(run_id=run_id, agent_id=agent, status="suspended", calls=[call], **fields)


async def test_a_finished_run_leaves_only_its_audit_and_a_tombstone_behind(store: RedisStore, redis_url: str):
    state = paused("r1", thread_id="t1", resource_id="u1")
    await store.create_run(state)
    # What the store keeps for all runs stays: its listings' change log (of bounded size) with its count,
    # and the mark saying which listings its indexes hold.
    log = {
        f"{store.prefix}paused-changes",
        f"{store.prefix}paused-changes-n",
        f"{store.prefix}listing-version",
    }
    assert await keys_under(redis_url, store.prefix) == {
        f"{store.prefix}run:r1",
        f"{store.prefix}suspended:a",
        f"{store.prefix}suspended-all",
        f"{store.prefix}suspended:a:thread:t1",
        f"{store.prefix}suspended:a:resource:u1",
        f"{store.prefix}suspended:a:thread:t1:resource:u1",
        f"{store.prefix}suspended-top",
        f"{store.prefix}suspended-top:a",
        f"{store.prefix}suspended-top:a:resource:u1",
        *log,
    }

    state.status, state.calls = "running", []
    entry = AuditEntry(
        run_id="r1", agent_id="a", tool_call_id="c1", tool_name="t", args={}, fingerprint="f", kind="approved"
    )
    await store.save_run(state, expected_version=1, audit=(entry,))
    assert await keys_under(redis_url, store.prefix) == {
        f"{store.prefix}run:r1",
        f"{store.prefix}running:a",
        f"{store.prefix}audit:r1",
        *log,
    }

    await store.delete_run("r1", expected_version=2)
    # The run's key stays as a tombstone (its id is never used again), holding nothing of the run.
    assert await keys_under(redis_url, store.prefix) == {
        f"{store.prefix}audit:r1",
        f"{store.prefix}run:r1",
        *log,
    }
    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    try:
        assert await client.hgetall(f"{store.prefix}run:r1") == {"finished": "1"}
    finally:
        await client.aclose()


async def test_ids_holding_the_key_separator_do_not_share_an_index(store: RedisStore):
    await store.create_run(paused("plain", agent="a", thread_id="x"))
    await store.create_run(paused("tricky", agent="a:thread:x"))

    found, total = await store.list_suspended_runs(SuspendedRunQuery(agent_id="a", thread_id="x"))
    assert ([s.run_id for s in found], total) == (["plain"], 1)
    found, total = await store.list_suspended_runs(SuspendedRunQuery(agent_id="a:thread:x"))
    assert ([s.run_id for s in found], total) == (["tricky"], 1)


async def test_two_prefixes_on_one_server_are_two_stores(redis_url: str, redis_prefix: str):
    one, two = RedisStore(redis_url, prefix=redis_prefix + "one:"), RedisStore(redis_url, prefix=redis_prefix)
    await one.create_run(paused("r1"))
    assert await two.load_run("r1") is None
    assert (await two.list_suspended_runs(SuspendedRunQuery(agent_id="a")))[1] == 0
    await one.close()
    await two.close()


async def test_runs_with_a_deadline_are_found_by_it_until_they_resume(store: RedisStore):
    deadline = T0 + timedelta(hours=1)
    state = paused("r1")
    state.calls[0].pauses[0].expires_at = deadline
    await store.create_run(state)
    await store.create_run(paused("no-deadline"))

    assert await store.list_expiring_runs("a", (deadline - timedelta(seconds=1)).timestamp()) == []
    assert await store.list_expiring_runs("a", deadline.timestamp()) == ["r1"]
    assert await store.list_expiring_runs("b", deadline.timestamp()) == []

    state.status, state.calls = "running", []
    await store.save_run(state, expected_version=1)
    assert await store.list_expiring_runs("a", deadline.timestamp()) == []


async def test_heartbeats_expire_on_the_servers_clock(store: RedisStore):
    await store.touch_owner("host-1", 60)
    await store.touch_owner("host-2", 0.05)
    assert await store.live_owners() == {"host-1", "host-2"}
    await asyncio.sleep(0.1)
    assert await store.live_owners() == {"host-1"}


def test_one_store_serves_event_loops_one_after_another(redis_url: str, redis_prefix: str):
    store = RedisStore(redis_url, prefix=redis_prefix)

    async def create(run_id: str) -> int:
        return await store.create_run(paused(run_id))

    async def listed() -> list[str]:
        found, _ = await store.list_suspended_runs(SuspendedRunQuery(agent_id="a"))
        return sorted(s.run_id for s in found)

    gc.collect()  # what earlier tests left behind is not this test's business
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert asyncio.run(create("r1")) == 1
        assert asyncio.run(create("r2")) == 1  # a new loop: the first loop's pool must not be reused
        assert asyncio.run(listed()) == ["r1", "r2"]
        gc.collect()
    assert [str(w.message) for w in caught] == [], "each loop's connections close as that loop ends"


async def test_a_closed_store_reconnects_on_its_next_call(store: RedisStore):
    await store.create_run(paused("r1"))
    await store.close()
    loaded = await store.load_run("r1")
    assert loaded is not None and loaded.version == 1


async def test_a_retried_write_whose_first_attempt_landed_is_not_applied_twice(
    store: RedisStore, monkeypatch: pytest.MonkeyPatch
):
    # A write is retried after a connection error, which may come after Redis applied it (only the reply
    # was lost). The retry carries the same token as the first attempt; replaying with one token is that.
    monkeypatch.setattr(redis_store_module, "_token", lambda: "same-write")
    entry = AuditEntry(
        run_id="r1", agent_id="a", tool_call_id="c1", tool_name="t", args={}, fingerprint="f", kind="approved"
    )

    assert await store.create_run(paused("r1")) == 1
    assert await store.create_run(paused("r1")) == 1
    assert await store.save_run(paused("r1"), expected_version=1, audit=(entry,)) == 2
    assert await store.save_run(paused("r1"), expected_version=1, audit=(entry,)) == 2
    await store.append_messages("t1", None, [{"role": "user", "content": "once"}])
    await store.append_messages("t1", None, [{"role": "user", "content": "once"}])

    assert len(await store.list_audit("r1")) == 1
    assert await store.load_messages("t1") == [{"role": "user", "content": "once"}]
    monkeypatch.undo()
    with pytest.raises(DuplicateRunError):
        await store.create_run(paused("r1"))
    with pytest.raises(StaleSnapshotError):
        await store.save_run(paused("r1"), expected_version=1)


async def test_it_pickles_as_its_url_and_prefix(store: RedisStore):
    await store.create_run(paused("r1"))

    copy = pickle.loads(pickle.dumps(store))

    assert (copy.url, copy.prefix, copy.identity) == (store.url, store.prefix, store.identity)
    loaded = await copy.load_run("r1")
    assert loaded is not None and loaded.version == 1
    await copy.close()


async def test_an_unreachable_redis_is_reported_with_its_url_but_not_its_password():
    port = free_port()  # nothing listens there
    store = RedisStore(f"redis://:s3cret@127.0.0.1:{port}/0", prefix="x:")
    started = time.monotonic()

    with pytest.raises(StorageUnavailableError) as caught:
        await store.load_run("r1")

    assert time.monotonic() - started < 2, "no retry loop between the caller and the error"
    message = caught.value.message
    assert f"redis://:***@127.0.0.1:{port}/0" in message and "is redis-server running there" in message
    assert caught.value.details["operation"] == "load_run"  # for whoever debugs it; not in the message
    assert "s3cret" not in message and "s3cret" not in store.identity and "s3cret" not in repr(store)
    assert caught.value.details["url"] == f"redis://:***@127.0.0.1:{port}/0"
    with pytest.raises(StorageUnavailableError):
        await store.save_run(paused("r1"), expected_version=1)
    await store.close()


async def test_pooled_connections_recover_after_a_restart(dedicated_redis: RedisServer):
    store = RedisStore(dedicated_redis.url, prefix="p:")
    await store.create_run(paused("r1"))
    # Several connections open at once, then idle in the pool while Redis restarts under them.
    await asyncio.gather(*(store.load_run("r1") for _ in range(8)))

    dedicated_redis.kill()
    with pytest.raises(StorageUnavailableError):
        await store.list_running_runs("a")
    dedicated_redis.start()

    loaded = await asyncio.gather(*(store.load_run("r1") for _ in range(8)))
    assert all(found is not None and found.version == 1 for found in loaded)
    assert (await store.list_suspended_runs(SuspendedRunQuery(agent_id="a")))[1] == 1
    await store.close()


async def test_pooled_connections_recover_from_a_restart_they_did_not_see(dedicated_redis: RedisServer):
    store = RedisStore(dedicated_redis.url, prefix="p:")
    await asyncio.gather(*(store.create_run(paused(f"r{i}")) for i in range(8)))

    dedicated_redis.kill()
    dedicated_redis.start()  # no command in between: every pooled connection is stale

    saved = await asyncio.gather(*(store.save_run(paused(f"r{i}"), expected_version=1) for i in range(8)))
    assert saved == [2] * 8
    await store.close()


async def test_indexes_written_before_the_top_level_listings_are_rebuilt_once(
    redis_url: str, redis_prefix: str
):
    """A store written by a Troupe from before paged listings has only the agent's and every agent's
    suspended indexes: the first listing rebuilds each listed run's indexes from its state (the shard's
    marker then says it is done), so the inbox finds runs that paused before the upgrade."""
    top, child = paused("top", resource_id="u1"), paused("child", parent=_parent())
    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    try:
        for state in (top, child):
            old = [f"{redis_prefix}suspended:a", f"{redis_prefix}suspended-all"]
            for key in old:
                await client.zadd(key, {state.run_id: -T0.timestamp()})
            await client.hset(
                f"{redis_prefix}run:{state.run_id}",
                mapping={"state": state.to_json(), "version": 3, "indexes": json.dumps(old)},
            )
        store = RedisStore(redis_url, prefix=redis_prefix)
        try:
            page = await store.list_paused(PausedQuery(agents=("a",), top_level=True, resources=("u1",)))
            assert ([s.run_id for s in page.states], page.total) == (["top"], 1)
            assert await client.get(f"{redis_prefix}listing-version") == "2"
            # The rebuilt indexes are the run's own from now on: its next write leaves them all.
            await store.save_run(
                top.model_copy(update={"status": "running", "calls": []}), expected_version=3
            )
            assert (await store.list_paused(PausedQuery(top_level=True))).total == 0
            assert [s.run_id for s in (await store.list_paused(PausedQuery(agents=("a",)))).states] == [
                "child"
            ]
        finally:
            await store.close()
    finally:
        await client.aclose()


def _parent() -> Any:
    from troupe.core.vocabulary.state import ParentLink

    return ParentLink(run_id="p", tool_call_id="d1", agent_id="sup")


# A plain URL is served by the store's own connection; an option sends it through redis-py's client.
@pytest.mark.parametrize("options", ["", "?client_name=troupe-test"], ids=["own", "redis-py"])
async def test_a_redis_that_evicts_keys_when_full_is_named_once(tmp_path, caplog, options: str):
    """With an eviction policy (``allkeys-lru``, say), a full Redis drops paused runs and their listings
    without an error: seen as 400 paused runs of which 20 were still listed and 167 gone. The store says
    so once, naming the setting, and works on; a Redis that does not evict says nothing."""
    caplog.set_level("WARNING", logger="troupe.storage.redis")
    with RedisServer(tmp_path / "lru", settings={"maxmemory-policy": "allkeys-lru"}) as lru:
        evicting = RedisStore(lru.url + options, prefix="evict:")
        await evicting.create_run(RunState(run_id="r1", agent_id="a"))
        await asyncio.gather(*(evicting.load_run("r1") for _ in range(3)))
        await evicting.close()
    warned = [r.getMessage() for r in caplog.records if "maxmemory-policy" in r.getMessage()]
    assert len(warned) == 1, warned
    assert "maxmemory-policy allkeys-lru" in warned[0] and "noeviction" in warned[0]

    caplog.clear()
    with RedisServer(tmp_path / "kept") as kept:
        keeping = RedisStore(kept.url + options, prefix="evict:")
        await keeping.create_run(RunState(run_id="r1", agent_id="a"))
        await keeping.close()
    assert not [r for r in caplog.records if "maxmemory-policy" in r.getMessage()]


@pytest.mark.parametrize("options", ["", "?client_name=troupe-test"], ids=["own", "redis-py"])
async def test_a_full_redis_is_an_outage_and_the_write_lands_once_it_has_room(tmp_path, options: str):
    """A full Redis (``maxmemory`` reached, ``noeviction``) refuses writes until it has room again: an
    outage of the store (503, retry), not a fault of Troupe's (``STORAGE_ERROR``, 500)."""
    with RedisServer(tmp_path / "full", settings={"maxmemory": "4mb"}) as full:
        store = RedisStore(full.url + options, prefix="full:")
        big = [{"role": "user", "content": "x" * 200_000}]
        try:
            refused = None
            for n in range(100):  # 20 MB in all: far past 4 MB
                try:
                    await store.create_run(RunState(run_id=f"r{n}", agent_id="a", messages=big))
                except StorageUnavailableError as exc:
                    refused = exc
                    break
            assert refused is not None and "is full (its maxmemory is reached)" in str(refused)
            client = redis.asyncio.Redis.from_url(full.url)
            await client.config_set("maxmemory", "0")
            await client.aclose()
            await store.create_run(RunState(run_id="after", agent_id="a", messages=big))
            assert (await store.load_run("after")) is not None
        finally:
            await store.close()
