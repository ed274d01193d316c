"""SqliteStore's group commit: the first write of a turn of the event loop commits at once, alone; the
writes after it in that turn share one transaction (one commit, one fsync with synchronous=FULL), each
in a savepoint of its own so that a failed write fails its caller alone; nobody hears back before its
commit has returned.

Commits are counted from SQLite's own record of them, its write-ahead log: each transaction appends its
pages there, the last of them marked as a commit. The store's counter must agree."""

from __future__ import annotations

import asyncio
import resource
import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from troupe.core.vocabulary.errors import StorageUnavailableError
from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.store import StaleSnapshotError, ThreadAppend
from troupe.storage import sqlite as sqlite_store

from troupe import SqliteStore

RUNS = 6


@pytest.fixture(autouse=True)
def _no_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """No checkpoint during these tests: once a checkpoint has copied the whole log, the next commit
    writes the log from its beginning again, and the commits counted in it would start from nothing."""
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_PAGES", 10**9)


def wal_commits(db: Path) -> int:
    """The transactions committed in ``db``'s write-ahead log, read from the file as SQLite wrote it.
    The log is a 32-byte header and then frames, each a 24-byte header and a page; a frame whose header
    gives the database's size after it (a nonzero second field) is the last of a committed transaction.
    Frames belong to this log while they carry its header's salts. No log yet: none."""
    wal = Path(f"{db}-wal")
    if not wal.exists():
        return 0
    data = wal.read_bytes()
    page_size = int.from_bytes(data[8:12], "big")
    salts = data[16:24]
    commits = 0
    for offset in range(32, len(data) - 24 - page_size + 1, 24 + page_size):
        frame = data[offset : offset + 24]
        if frame[8:16] != salts:
            break
        commits += int.from_bytes(frame[4:8], "big") != 0
    return commits


def stored_versions(db: Path) -> dict[str, tuple[int, int]]:
    """Each run's (version, step), read by a connection of its own: what is durable in the file."""
    with closing(sqlite3.connect(db)) as other:
        rows = other.execute("SELECT run_id, version, body FROM runs").fetchall()
    return {run_id: (version, RunState.from_json(body).step) for run_id, version, body in rows}


def running(run_id: str, step: int = 0) -> RunState:
    return RunState(run_id=run_id, agent_id="a", messages=[{"role": "user", "content": run_id}], step=step)


async def stored_runs(db: Path) -> tuple[SqliteStore, list[RunState]]:
    """A store (synchronous=FULL: an fsync per commit) holding RUNS runs at version 1."""
    store = SqliteStore(db, synchronous="FULL")
    states = [running(f"r{i}") for i in range(RUNS)]
    for state in states:
        await store.create_run(state)
    return store, states


async def save_all(
    store: SqliteStore, states: list[RunState], expected: list[int], **kwargs: Any
) -> list[Any]:
    """Save every run at once (each at its own expected version); what each save returned or raised."""
    for state in states:
        state.step = 1
    saves = [store.save_run(s, expected_version=v, **kwargs) for s, v in zip(states, expected, strict=True)]
    return await asyncio.gather(*saves, return_exceptions=True)


async def test_concurrent_saves_of_different_runs_share_one_commit(tmp_path: Path):
    db = tmp_path / "t.db"
    store, states = await stored_runs(db)
    try:
        before, counted = wal_commits(db), store.commits
        assert await save_all(store, states, [1] * RUNS) == [2] * RUNS
        # The first save committed at once, alone (the leader); the other five (followers: they came
        # in the same turn of the loop) together, at the start of the next one.
        assert wal_commits(db) == before + 2
        assert (store.commits, store.writes) == (counted + 2, 2 * RUNS)  # the creates were one each
        assert stored_versions(db) == {s.run_id: (2, 1) for s in states}
    finally:
        await store.close()


async def test_a_stale_compare_and_set_in_a_shared_commit_fails_its_run_alone(tmp_path: Path):
    db = tmp_path / "t.db"
    store, states = await stored_runs(db)
    try:
        before = wal_commits(db)
        expected = [1] * RUNS
        expected[2] = 7  # r2 was read long ago: its write must lose, and only its write
        outcomes = await save_all(store, states, expected)
        assert isinstance(outcomes[2], StaleSnapshotError) and "r2" in str(outcomes[2]), outcomes
        assert outcomes[:2] + outcomes[3:] == [2] * (RUNS - 1), outcomes
        assert wal_commits(db) == before + 2  # r0 alone, then r1 to r5 together
    finally:
        await store.close()
    # A fresh connection and a fresh store see the others durable, r2 as it was.
    assert stored_versions(db) == {s.run_id: (1, 0) if s.run_id == "r2" else (2, 1) for s in states}
    again = SqliteStore(db)
    try:
        stored = await again.load_run("r3")
        assert stored is not None and stored.version == 2 and stored.state.step == 1
    finally:
        await again.close()


async def test_a_write_that_fails_half_way_in_a_shared_commit_leaves_nothing_of_itself(tmp_path: Path):
    # r2's run row is updated before its thread's messages turn out not to be JSON: its savepoint takes
    # the update back, and the other runs' writes in the same transaction stay.
    db = tmp_path / "t.db"
    store, states = await stored_runs(db)
    try:
        broken = ThreadAppend("t-r2", None, [{"role": "user", "content": object()}])
        saves = [
            store.save_run(
                running(s.run_id, step=1), expected_version=1, thread=broken if s.run_id == "r2" else None
            )
            for s in states
        ]
        outcomes = await asyncio.gather(*saves, return_exceptions=True)
        assert isinstance(outcomes[2], TypeError), outcomes
        assert outcomes[:2] + outcomes[3:] == [2] * (RUNS - 1), outcomes
        assert await store.load_messages("t-r2") == []
    finally:
        await store.close()
    assert stored_versions(db) == {s.run_id: (1, 0) if s.run_id == "r2" else (2, 1) for s in states}


async def test_a_lone_write_that_fails_half_way_leaves_nothing_of_itself(tmp_path: Path):
    # Alone in its transaction, without a savepoint: the transaction is rolled back instead.
    db = tmp_path / "t.db"
    store, _ = await stored_runs(db)
    try:
        broken = ThreadAppend("t-r2", None, [{"role": "user", "content": object()}])
        with pytest.raises(TypeError):
            await store.save_run(running("r2", step=1), expected_version=1, thread=broken)
        assert await store.load_messages("t-r2") == []
    finally:
        await store.close()
    assert stored_versions(db)["r2"] == (1, 0)


async def test_a_lone_save_is_committed_at_once_before_it_returns(tmp_path: Path):
    db = tmp_path / "t.db"
    creator = SqliteStore(db)
    await creator.create_run(running("r1"))
    await creator.close()
    store = SqliteStore(db, synchronous="FULL")
    try:
        before = wal_commits(db)
        later: list[str] = []
        asyncio.get_running_loop().call_soon(later.append, "the loop's next turn")
        assert await store.save_run(running("r1", step=1), expected_version=1) == 2
        # Committed without waiting for anything, not even the loop's next turn: a lone write costs
        # what it did before group commit.
        assert later == []
        # Straight away, before this task yields to anything: another connection reads it.
        assert stored_versions(db) == {"r1": (2, 1)}
        assert wal_commits(db) == before + 1
    finally:
        await store.close()


async def test_no_writer_hears_success_from_a_shared_commit_that_failed(tmp_path: Path):
    # The commit's write to the log is refused by the OS, as on a full disk: the file-size limit of
    # this process is set to the log's current size, which the commit would grow. The writes' own
    # statements only touch pages in SQLite's cache, so the commit is where it fails.
    db = tmp_path / "t.db"
    store, states = await stored_runs(db)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        before = wal_commits(db)
        resource.setrlimit(resource.RLIMIT_FSIZE, (Path(f"{db}-wal").stat().st_size, hard))
        try:
            outcomes = await save_all(store, states, [1] * RUNS)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        assert all(isinstance(o, StorageUnavailableError) for o in outcomes), outcomes
        assert wal_commits(db) == before
        assert stored_versions(db) == {s.run_id: (1, 0) for s in states}
        # Once the disk has room again, the same store writes again.
        assert await store.save_run(running("r0", step=1), expected_version=1) == 2
        assert stored_versions(db)["r0"] == (2, 1)
    finally:
        await store.close()


class WaitingStore(SqliteStore):
    """Says (from the worker thread) when a call had to wait there for the database's write lock, and
    (on the loop) once two transactions have been handed to the worker thread to wait for it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.waiting = threading.Event()
        self.queued = asyncio.Event()
        self.handed = 0

    def _wait_and_call(self, fn: Any) -> Any:
        self.waiting.set()
        return super()._wait_and_call(fn)

    def _worker(self) -> Any:
        self.handed += 1  # only to hand a transaction over: no checkpoint runs here (the fixture above)
        if self.handed == 2:
            self.queued.set()
        return super()._worker()


async def waiting_with_runs(db: Path) -> WaitingStore:
    """A WaitingStore holding runs r0, r1 and r2 at version 1."""
    store = WaitingStore(db)
    for i in range(3):
        await store.create_run(running(f"r{i}"))
    return store


async def test_writes_that_find_the_database_busy_commit_on_the_worker_thread(tmp_path: Path):
    # Another process's connection holds the write lock: the writes cannot wait on the event loop, so
    # they wait for the lock on the worker thread, the shared ones still as one transaction.
    db = tmp_path / "t.db"
    store = await waiting_with_runs(db)
    try:
        counted = store.commits
        with closing(sqlite3.connect(db, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            saves = asyncio.gather(
                *(store.save_run(running(f"r{i}", 1), expected_version=1) for i in range(3))
            )
            waiting = asyncio.ensure_future(asyncio.to_thread(store.waiting.wait))
            try:
                await asyncio.wait([saves, waiting], return_when=asyncio.FIRST_COMPLETED)
                assert waiting.done() and not saves.done(), saves  # not failed at once for being busy
            finally:
                store.waiting.set()  # the thread waiting for it goes, whatever happened
            other.execute("COMMIT")
            assert await saves == [2, 2, 2]
        assert store.commits == counted + 2  # r0 alone, r1 and r2 together
        assert stored_versions(db) == {f"r{i}": (2, 1) for i in range(3)}
    finally:
        await store.close()


async def test_a_write_whose_caller_is_cancelled_while_it_waits_for_the_lock_is_not_made(tmp_path: Path):
    # Another process holds the write lock: the lone write (the leader) and the shared one after it wait
    # for it on the worker thread. Their callers are cancelled meanwhile, so each was told its write
    # failed: once the lock is free, neither may be committed (their runs stay at version 1), and the
    # write whose caller still waits is.
    db = tmp_path / "t.db"
    store = await waiting_with_runs(db)
    try:
        with closing(sqlite3.connect(db, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            saves = [
                asyncio.ensure_future(store.save_run(running(f"r{i}", 1), expected_version=1))
                for i in range(3)
            ]
            # The leader's transaction, then the followers', are handed to the worker thread to wait.
            await store.queued.wait()
            assert not any(save.done() for save in saves), saves
            saves[0].cancel()  # the leader
            saves[1].cancel()  # a follower in the shared transaction
            with pytest.raises(asyncio.CancelledError):
                await saves[0]
            with pytest.raises(asyncio.CancelledError):
                await saves[1]
            other.execute("COMMIT")
            assert await saves[2] == 2
        assert stored_versions(db) == {"r0": (1, 0), "r1": (1, 0), "r2": (2, 1)}
        # The same store goes on writing the cancelled runs from the version their callers read.
        assert await store.save_run(running("r0", 1), expected_version=1) == 2
        assert await store.save_run(running("r1", 1), expected_version=1) == 2
    finally:
        await store.close()
