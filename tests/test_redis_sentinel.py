"""RedisStore through Sentinel (``redis+sentinel://``), on a real master, replica and Sentinel: the store
finds the master by its service name and follows it when the master dies and Sentinel promotes the
replica, losing nothing that had reached the replica.
(The conformance suite runs through the Sentinel too.)"""

from __future__ import annotations

import asyncio

import pytest
import redis
from redis_sentinel import RedisSentinelSetup
from test_store_conformance import T0, running, suspended
from troupe.core.vocabulary.store import SuspendedRunQuery
from troupe.storage import RedisStore

pytestmark = pytest.mark.redis


async def test_a_store_found_through_sentinel_follows_its_master_through_a_failover(
    redis_sentinel: RedisSentinelSetup, redis_prefix: str
):
    store = RedisStore.from_url(redis_sentinel.url, prefix=redis_prefix)
    try:
        await store.create_run(suspended("r1", T0))
        old = redis_sentinel.master_port()
        with redis.Redis(port=old, password=redis_sentinel.password) as master:
            assert master.wait(1, 5000) == 1, "the replica has the run before the master goes"

        new = await asyncio.to_thread(redis_sentinel.kill_master)

        assert new != old
        loaded = await store.load_run("r1")
        assert loaded is not None and loaded.version == 1
        assert await store.save_run(running("r1"), expected_version=1) == 2
        assert (await store.list_suspended_runs(SuspendedRunQuery(agent_id="a")))[1] == 0
        with redis.Redis(port=new, password=redis_sentinel.password, decode_responses=True) as master:
            assert master.hget(f"{redis_prefix}run:r1", "version") == "2", "written to the new master"
    finally:
        await store.close()
