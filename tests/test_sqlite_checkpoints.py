"""SqliteStore's WAL checkpoints: passive ones on its worker thread, so that a commit on the event loop
does not stop to copy the log into the database file (a stall for every run of the process); SQLite's own
checkpoint only as a backstop, which keeps the log bounded when writes never pause."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from troupe.core.vocabulary.state import RunState
from troupe.storage import sqlite as sqlite_store

from troupe import SqliteStore

# A run's state with this much text fills a few pages of the log at each write.
BIG = "x" * 12_000
PAGE = 4096


class NotingStore(SqliteStore):
    """Notes the thread of each checkpoint statement, and each call that had to wait on the worker
    thread because the event loop's connection found the database busy."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.checkpoints: list[str] = []
        self.waited = 0

    def _open(self, busy_timeout_ms: int) -> sqlite3.Connection:
        conn = super()._open(busy_timeout_ms)
        conn.set_trace_callback(self._trace)
        return conn

    def _trace(self, statement: str) -> None:
        if "wal_checkpoint" in statement:
            self.checkpoints.append(threading.current_thread().name)

    def _wait_and_call(self, fn: Any) -> Any:
        self.waited += 1
        return super()._wait_and_call(fn)


async def write_runs(store: SqliteStore, count: int, first: int = 0) -> None:
    """``count`` runs, each stored and then written again."""
    for i in range(first, first + count):
        state = RunState(run_id=f"run-{i}", agent_id="a", messages=[{"role": "user", "content": BIG}])
        version = await store.save_run(state, expected_version=0)
        await store.save_run(state, expected_version=version)


def sizes(db: Path) -> tuple[int, int]:
    """The database file's size and its log's, in bytes."""
    wal = db.with_name(db.name + "-wal")
    return db.stat().st_size, wal.stat().st_size if wal.exists() else 0


async def test_commits_on_the_event_loop_leave_checkpoints_to_the_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_PAGES", 10**9)  # none of the worker's yet
    db = tmp_path / "troupe.db"
    store = NotingStore(db)
    try:
        await write_runs(store, 1)
        empty, _ = sizes(db)
        # (80 runs: a running run's writes no longer touch the listings' indexes, so each is a few pages.)
        await write_runs(store, 80, first=1)
        database, log = sizes(db)
        # Past the 1,000 pages at which SQLite would checkpoint inside a commit, short of the backstop:
        # nothing reached the database file, so no commit on the loop stopped to copy the log.
        assert 1000 * PAGE < log < sqlite_store.BACKSTOP_PAGES * PAGE, log
        assert database == empty, (empty, database)
        assert store.checkpoints == []

        monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_PAGES", 60)
        await write_runs(store, 1, first=81)  # now one is due
        assert store._checkpointing is not None
        await asyncio.wrap_future(store._checkpointing)
        assert store.checkpoints == ["troupe-sqlite_0"]
        assert sizes(db)[0] > 50 * len(BIG)  # the runs are in the database file itself
    finally:
        await store.close()


async def test_the_log_stays_bounded_while_writes_never_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The worker's passive checkpoints never reach the end of a log that grows while they copy, so the
    # log could not start again from its beginning without the backstop in a commit. (A lower backstop
    # than the store's, so that the test's writes pass it many times.)
    monkeypatch.setattr(sqlite_store, "BACKSTOP_PAGES", 400)
    db = tmp_path / "troupe.db"
    store = NotingStore(db)
    largest = 0
    try:
        for i in range(10):
            await write_runs(store, 100, first=100 * i)  # about 1,800 pages of log
            largest = max(largest, sizes(db)[1])
        assert len(store.checkpoints) > 10, store.checkpoints
        assert set(store.checkpoints) == {"troupe-sqlite_0"}, store.checkpoints
        # 10 x 1,800 pages went through the log; it never held more than a few backstops' worth.
        assert largest < 4 * 400 * PAGE, largest
    finally:
        await store.close()
    again = SqliteStore(db)  # everything written is there for a fresh store
    try:
        stored = await again.load_run("run-999")
        assert stored is not None and stored.version == 2
    finally:
        await again.close()


async def test_a_long_conversation_is_checkpointed_long_before_the_backstop(tmp_path: Path):
    # A run with a long conversation fills dozens of pages of the log at each write but changes one row:
    # counted by changed rows alone, its writes would fill the log to the backstop (a checkpoint inside a
    # commit, on the event loop) before the worker's turn came. Each checkpoint is let finish before the
    # next write, as on a quiet machine, so the log's size is what the count lets it reach.
    db = tmp_path / "troupe.db"
    store = NotingStore(db)
    long = [{"role": "user", "content": "x" * 200_000}]  # about 49 pages a write
    largest = 0
    try:
        for i in range(40):
            state = RunState(run_id=f"run-{i}", agent_id="a", messages=long)
            await store.save_run(state, expected_version=await store.save_run(state, expected_version=0))
            if store._checkpointing is not None:
                await asyncio.wrap_future(store._checkpointing)
            largest = max(largest, sizes(db)[1])
        assert store.checkpoints and set(store.checkpoints) == {"troupe-sqlite_0"}, store.checkpoints
        # About 40 x 150 pages went through the log: a checkpoint came every few writes, so it stayed far
        # from the backstop, which the log would reach if only the changed rows counted.
        assert largest < sqlite_store.BACKSTOP_PAGES // 4 * PAGE, largest / PAGE
    finally:
        await store.close()


async def test_a_checkpoint_never_makes_the_event_loop_wait_for_the_database(tmp_path: Path):
    # A checkpoint that took the write lock (a restart, say) would make the loop's connection find the
    # database busy, and each write during it would hop to the worker thread and queue there.
    store = NotingStore(tmp_path / "troupe.db")
    try:
        await write_runs(store, 600)
        # About 19 fall due; one due while the worker still copies the last is taken with the next, so
        # how many run depends on the machine's load (8 on a busy one): enough that the loop met several.
        assert len(store.checkpoints) >= 3, store.checkpoints
        assert store.waited == 0
    finally:
        await store.close()


async def test_a_store_in_memory_never_checkpoints():
    store = NotingStore(Path(":memory:"))
    try:
        await write_runs(store, 100)
        assert store._checkpointing is None and store.checkpoints == []
    finally:
        await store.close()
