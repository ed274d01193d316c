"""SqliteStore's WAL checkpoints run on its worker thread, never inside a commit on the event loop (where
copying the log back and its fsyncs stalled every run of the process), and they keep the log bounded."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from concurrent.futures import wait
from pathlib import Path

import pytest
from troupe.core.state import RunState
from troupe.storage import sqlite as sqlite_store

from troupe import SqliteStore

# A run's state with this much text fills a few pages of the log per write.
BIG = "x" * 12_000


class ThreadNotingStore(SqliteStore):
    """Notes each checkpoint statement and the thread it ran on."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.checkpoints: list[str] = []  # the thread each ran on
        self.statements: list[str] = []

    def _open(self, busy_timeout_ms: int) -> sqlite3.Connection:
        conn = super()._open(busy_timeout_ms)
        conn.set_trace_callback(self._trace)
        return conn

    def _trace(self, statement: str) -> None:
        if "wal_checkpoint" in statement:
            self.checkpoints.append(threading.current_thread().name)
            self.statements.append(statement)


async def write_runs(store: SqliteStore, count: int, first: int = 0) -> None:
    """``count`` runs, each stored and then written again (two changed rows)."""
    for i in range(first, first + count):
        state = RunState(run_id=f"run-{i}", agent_id="a", messages=[{"role": "user", "content": BIG}])
        version = await store.save_run(state, expected_version=0)
        await store.save_run(state, expected_version=version)


def sizes(db: Path) -> tuple[int, int]:
    """The database file's size and its log's."""
    wal = db.with_name(db.name + "-wal")
    return db.stat().st_size, wal.stat().st_size if wal.exists() else 0


async def test_a_commit_on_the_event_loop_never_copies_the_log_into_the_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # No checkpoint of the store's own is due in this test, so whatever reaches the database file was
    # copied there by a commit (SQLite's automatic checkpoint, at 1,000 pages of log).
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_CHANGES", 10**9)
    db = tmp_path / "troupe.db"
    store = ThreadNotingStore(db)
    try:
        await write_runs(store, 1)
        empty, _ = sizes(db)
        await write_runs(store, 200, first=1)  # over 2,000 pages of log
        database, log = sizes(db)
        assert log > 2_000 * 4096, log
        assert database == empty, (empty, database)
        assert store.checkpoints == []
    finally:
        await store.close()


async def test_the_worker_thread_checkpoints_so_the_log_stays_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Writes keep coming while each checkpoint copies, so no passive pass ever copies the whole log
    # and it never starts again from its beginning by itself: the cap restarts it. (A lower cap than
    # the store's, so that a few seconds of writes pass it several times.)
    monkeypatch.setattr(sqlite_store, "WAL_CAP_FRAMES", 4000)
    db = tmp_path / "troupe.db"
    store = ThreadNotingStore(db)
    largest = 0
    try:
        for i in range(12):
            await write_runs(store, 150, first=150 * i)  # 300 changed rows, about 3,700 pages of log
            assert store._checkpointing is not None
            await asyncio.wrap_future(store._checkpointing)  # each one finishes: the test's pace
            assert len(store.checkpoints) > i
            largest = max(largest, sizes(db)[1])
        assert set(store.checkpoints) == {"troupe-sqlite_0"}, store.checkpoints
        # 12 x 3,700 pages went through the log; it never held much more than the cap and one
        # checkpoint's worth.
        assert largest < 3 * sqlite_store.WAL_CAP_FRAMES * 4096, largest
        assert sizes(db)[0] > 1_800 * len(BIG)  # the runs are in the database file itself
    finally:
        await store.close()
    # Everything written is in the database, read back by a fresh store.
    again = SqliteStore(db)
    try:
        stored = await again.load_run("run-1799")
        assert stored is not None and stored.version == 2
    finally:
        await again.close()


async def test_a_reader_that_stays_holds_the_restart_back_only_briefly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # A restart waits for readers while writers wait for it. A reader that stays (another process's
    # open transaction, a tool's) must not stall the store's writes for the worker's whole busy timeout
    # (30 s): the restart gives up after RESTART_WAIT_MS and the next checkpoint tries again.
    monkeypatch.setattr(sqlite_store, "WAL_CAP_FRAMES", 1000)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_CHANGES", 10**9)  # none until the test says
    db = tmp_path / "troupe.db"
    store = ThreadNotingStore(db)
    reader = sqlite3.connect(db, isolation_level=None)
    try:
        await write_runs(store, 50)
        reader.execute("BEGIN")
        assert reader.execute("SELECT COUNT(*) FROM runs").fetchone() == (50,)  # its snapshot stays
        await write_runs(store, 100, first=50)  # the log is over the cap
        monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_CHANGES", 1)
        await write_runs(store, 1, first=150)  # now a checkpoint is due: it goes on to a restart
        assert store._checkpointing is not None
        done, _ = wait([store._checkpointing], timeout=10)
        assert done, "the restart waited for the reader"
        assert store.statements == ["PRAGMA wal_checkpoint(PASSIVE)", "PRAGMA wal_checkpoint(RESTART)"]
        await write_runs(store, 1, first=200)  # the store writes on, the reader still there
        assert reader.execute("SELECT COUNT(*) FROM runs").fetchone() == (50,)
    finally:
        reader.close()
        await store.close()


async def test_a_store_in_memory_never_checkpoints(tmp_path: Path):
    store = ThreadNotingStore(Path(":memory:"))
    try:
        await write_runs(store, 300)
        assert store._checkpointing is None and store.checkpoints == []
    finally:
        await store.close()
