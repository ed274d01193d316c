"""A listing page reads a bounded number of runs from the store, whatever number of runs wait: the reads
are counted, never timed. Counted on each backend: the runs it parses (``RunState.from_json``, which every
store goes through), and what only the backend can say of its own work: SQLite's virtual machine steps
(its progress handler, called at each step), Redis's key lookups (``keyspace_hits`` and ``_misses``).
The same pages are read at 40 and at 400 waiting runs: the first page and a page deep in the cursor, as
the inbox of a tenant with two resources reads them (two indexes), and then through the inbox itself."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from troupe.api.inbox import inbox_json
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.listing import PausedQuery, Place, encode_cursor
from troupe.core.vocabulary.state import CallStatus, Pause, RunState, ToolCallState
from troupe.core.vocabulary.store import Store
from troupe.storage import RedisStore

from troupe import Agent, MemoryStore, Runtime, SqliteStore
from troupe.testing import ScriptedModel, text

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SMALL, LARGE = 40, 400
PAGE = 10
TENANT = Principal("tenant", "troupe", "tenant", resources=frozenset({"r0", "r1"}))


def waiting(i: int) -> RunState:
    at = T0 + timedelta(seconds=i)
    pause = Pause(
        kind="approval", tool_name="t", args={"n": i}, agent_path=["a"], fingerprint="f" * 32, paused_at=at
    )
    call = ToolCallState(
        tool_call_id="c1", tool_name="t", args={"n": i}, status=CallStatus.AWAITING_APPROVAL, pauses=[pause]
    )
    return RunState(
        run_id=f"run-{i:05d}", agent_id="a", status="suspended", resource_id=f"r{i % 2}", calls=[call]
    )


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], Store]:
    def make(name: str) -> Store:
        if request.param == "memory":
            return MemoryStore()
        if request.param == "sqlite":
            return SqliteStore(tmp_path / f"{name}.db")
        prefix = request.getfixturevalue("redis_prefix") + name + ":"
        return RedisStore(request.getfixturevalue("redis_url"), prefix=prefix)

    return make


async def seeded(store: Store, runs: int) -> Store:
    for first in range(0, runs, 200):
        await asyncio.gather(*(store.create_run(waiting(i)) for i in range(first, min(first + 200, runs))))
    return store


class Reads:
    """What one call made the store read: runs parsed, and the backend's own count of its work."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.parsed = 0
        self.work = 0
        parse = RunState.from_json.__func__  # type: ignore[attr-defined]

        def counted(cls: type[RunState], raw: Any) -> RunState:
            self.parsed += 1
            return parse(cls, raw)  # type: ignore[no-any-return]

        monkeypatch.setattr(RunState, "from_json", classmethod(counted))

    @contextmanager
    def counting(self, store: Store) -> Iterator[None]:
        self.parsed = self.work = 0
        if isinstance(store, SqliteStore):
            conn = store._fast  # the connection reads run on (opened by the seeding's writes)
            assert conn is not None

            def step() -> int:
                self.work += 1
                return 0

            conn.set_progress_handler(step, 1)
            try:
                yield
            finally:
                conn.set_progress_handler(None, 1)
        elif isinstance(store, RedisStore):
            client = redis.Redis.from_url(store.url)
            before = _lookups(client)
            yield
            self.work = _lookups(client) - before
            client.close()
        else:
            yield


def _lookups(client: redis.Redis) -> int:
    stats = client.info("stats")
    return int(stats["keyspace_hits"]) + int(stats["keyspace_misses"])


async def pages_read(store: Store, runs: int, reads: Reads) -> list[tuple[int, int]]:
    """(runs parsed, backend work) for the first page and for a page deep in the cursor (the one
    before the last), each checked to be the right page."""
    query = dict(agents=("a",), top_level=True, resources=("r0", "r1"), limit=PAGE)
    found = []
    deep = runs - 2 * PAGE
    for cursor, first in (
        (None, 0),
        (encode_cursor(PausedQuery(**query), Place(_at(deep - 1), f"run-{deep - 1:05d}")), deep),
    ):
        with reads.counting(store):
            page = await store.list_paused(PausedQuery(**query, cursor=cursor))
        assert [s.run_id for s in page.states] == [f"run-{i:05d}" for i in range(first, first + PAGE)]
        assert page.total == runs and page.next_cursor is not None
        found.append((reads.parsed, reads.work))
    return found


def _at(i: int) -> float:
    return (T0 + timedelta(seconds=i)).timestamp()


async def test_a_page_reads_the_same_whatever_the_number_of_runs_waiting(
    make_store: Callable[[str], Store], monkeypatch: pytest.MonkeyPatch
):
    reads = Reads(monkeypatch)
    measured = {}
    for runs in (SMALL, LARGE):
        store = await seeded(make_store(f"n{runs}"), runs)
        try:
            measured[runs] = await pages_read(store, runs, reads)
        finally:
            await store.close()
    for (small_parsed, small_work), (large_parsed, large_work) in zip(
        measured[SMALL], measured[LARGE], strict=True
    ):
        assert small_parsed == large_parsed == PAGE, "only the page's runs are parsed"
        # Ten times the runs: the same work, give or take a level of an index (a scan is ten times as much).
        assert large_work <= small_work * 1.5 + 50, measured


async def test_the_inbox_reads_one_page_whatever_the_number_of_runs_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Through the inbox's own listing (``GET /api/inbox``'s): the runs it parses are its page's."""
    reads = Reads(monkeypatch)
    parsed = {}
    for runs in (SMALL, LARGE):
        store = await seeded(SqliteStore(tmp_path / f"inbox-{runs}.db"), runs)
        runtime = Runtime(
            [Agent("a", model=ScriptedModel([text("unused")]))], storage=store, executor="local"
        )
        try:
            with reads.counting(store):
                body = await inbox_json(runtime, TENANT, None, PAGE)
            assert [r["runId"] for r in body["runs"]] == [f"run-{i:05d}" for i in range(PAGE)]
            assert body["total"] == runs
            parsed[runs] = (reads.parsed, reads.work)
        finally:
            await runtime.shutdown()
    assert parsed[SMALL][0] == parsed[LARGE][0] == PAGE, parsed
    assert parsed[LARGE][1] <= parsed[SMALL][1] * 1.5 + 50, parsed
