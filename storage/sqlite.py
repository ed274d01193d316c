"""SqliteStore: the embedded default. One file, safe for several processes (WAL, busy timeout).

sqlite3 is blocking. Each statement here is tiny (well under a millisecond in WAL mode), so it runs
right on the event loop, which is several times faster than a hop to a thread. Only when another
process holds the write lock (SQLITE_BUSY) does the call move to a dedicated thread with its own
connection, which waits for the lock there instead of stalling the loop. Compare-and-set is an
``UPDATE ... WHERE version = ?`` inside a transaction, which SQLite serialises across processes.

WAL checkpoints (copying the log back into the database file, with an fsync of each) run on that thread
too, as passive checkpoints that wait for no one: once the log has gained about ``CHECKPOINT_EVERY_PAGES``
pages since the last one (``_logged``). Left to itself SQLite runs one inside whichever commit fills the
log to 1,000 pages: on the event loop, a stall of several milliseconds for every run of the process every
few dozen approval cycles. SQLite's own
checkpoint stays on as a backstop at ``BACKSTOP_PAGES``: while writes keep coming, a passive checkpoint
from another connection never gets to the end of the log, so the log starts again from its beginning
only after a checkpoint inside a commit, which by then has only the last few pages left to copy.

Group commit, leader and followers: the first write of a turn of the event loop (the leader) is
committed at once, alone, as before group commit (no timer, nothing added to a lone write). The writes
asked for after it in the same turn (the followers: other runs that reach a write at the same moment,
or the leader's task writing again) go into one transaction, committed at the start of the next turn
(``call_soon``), so they share one commit and, with ``synchronous=FULL``, one fsync. A follower waits a
turn of the loop, and the tasks that run meanwhile get to their writes and join it: with runs in flight
the writes gather into a few commits per turn whatever their number. Each write of a shared
transaction runs inside a SAVEPOINT of its own: a failed compare-and-set (or any write that raises) is
rolled back to its savepoint and fails its caller alone; the others commit. Nobody is answered before
the COMMIT has returned (a commit that fails fails every write in it). A transaction runs in one go on
the loop, so it is never open while other code runs: reads on the same connection see only what is
committed, and the write lock is held no longer than the statements and the commit take.

A write whose caller is cancelled before its transaction takes it is not made: the caller was told it
failed, so the run must still be at the version the caller read. On the loop that is every cancel that
lands before the commit (the commit runs in one go); a write waiting for the lock on the worker thread
(another process holds it) is checked when the lock is got, just before its statements run, so a cancel
that lands while it waits (for up to the busy timeout) leaves nothing written either.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from troupe.core.vocabulary.errors import DuplicateRunError, StorageUnavailableError
from troupe.core.vocabulary.listing import PausedChanges, PausedPage, PausedQuery, readable
from troupe.core.vocabulary.run_record import RunRecord, as_record
from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.store import (
    AuditEntry,
    LinkRecord,
    OutboxEntry,
    StaleSnapshotError,
    StoredRun,
    SuspendedRunQuery,
    ThreadAppend,
    suspended_runs,
)
from troupe.storage.private_file import create_private
from troupe.storage.sqlite_listing import keep_roles, prepare, read_changes, read_page, refuse_newer

log = logging.getLogger(__name__)

T = TypeVar("T")

Synchronous = Literal["NORMAL", "FULL"]
_SYNCHRONOUS: tuple[Synchronous, ...] = ("NORMAL", "FULL")

# The pages the log gains between two checkpoints on the worker thread (see above), as ``_logged`` counts
# them. Each checkpoint copies every page the log holds once, however often it was written meanwhile (a
# listing's counters and change log, the tail of its indexes), and fsyncs the database file with FULL: at
# 60 changed rows (a checkpoint every four W1 cycles) they took 0.32 ms of the worker's time per cycle, at
# 250 pages (one every fifteen) 0.08 ms. Well short of the backstop, which a checkpoint comes before.
CHECKPOINT_EVERY_PAGES = 250
# SQLite's page (its default), to count the pages a run's JSON fills.
PAGE_BYTES = 4096
# The log's size, in pages, at which a commit checkpoints (SQLite's wal_autocheckpoint; its default is
# 1,000): twice a few checkpoints' worth, so that it only comes in to let the log start again.
BACKSTOP_PAGES = 2000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    status TEXT NOT NULL,
    thread_id TEXT,
    resource_id TEXT,
    suspended_at REAL,
    version INTEGER NOT NULL,
    body TEXT NOT NULL,
    expires_at REAL,
    top INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_run ON audit (run_id, id);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    thread_id TEXT NOT NULL,
    resource_id TEXT,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_thread ON messages (thread_id, id);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    run_id TEXT NOT NULL,
    status TEXT NOT NULL,
    due REAL NOT NULL,
    lease_owner TEXT,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (status, due);
CREATE INDEX IF NOT EXISTS outbox_by_run ON outbox (run_id, seq);
CREATE TABLE IF NOT EXISTS finished_runs (run_id TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS owners (
    owner TEXT PRIMARY KEY,
    expires_at REAL NOT NULL
);
"""


# A write's outcome within its batch: (True, what it returned) or (False, what it raised).
_Outcome = tuple[bool, Any]


class _Cancelled(Exception):
    """The outcome of a write whose caller was cancelled before its transaction took it."""


class _Write:
    """A write and the future its caller awaits: made only if that caller is still waiting when its
    transaction takes it (on the loop, or on the worker thread once it holds the write lock)."""

    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[sqlite3.Connection], Any], future: asyncio.Future[Any]) -> None:
        self.fn = fn
        self.future = future

    def __call__(self, conn: sqlite3.Connection) -> Any:
        # Read from the worker thread too: a future's state is one attribute, and a cancel sets it on the
        # loop before the caller hears of it, so a write whose caller was told "cancelled" is never made.
        if self.future.cancelled():
            raise _Cancelled
        return self.fn(conn)


class _Batch:
    """The followers of one turn of an event loop (see above), waiting for their shared commit."""

    __slots__ = ("loop", "writes")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.writes: list[_Write] = []


class SqliteStore:
    """A store in a SQLite file: durable across restarts, shared by the processes of one machine.

    Paused runs survive any restart: a new runtime on the same file picks them up. Concurrent writes
    share commits (group commit). ``commits`` and ``writes`` count the transactions this store
    committed and the writes in them (``writes / commits`` is the group commit's batch size). Its
    methods are the store protocol's (``troupe.core.vocabulary.store.Store``); the runtime calls them.

    Args:
        path: The database file (made if missing); ``":memory:"`` for one in this process only.
        synchronous: SQLite's fsync policy in WAL mode. ``"NORMAL"`` (the default): a commit survives a
            crash of the process, but a power cut or OS crash may lose the last commits. ``"FULL"``: an
            fsync per commit, so an acknowledged write survives those too (slower).

    Raises:
        ValueError: An unknown ``synchronous``.

    Example:
        >>> runtime = Runtime([agent], storage=SqliteStore("troupe.db"))
    """

    shared_across_processes = True

    def __init__(self, path: str | Path, *, synchronous: Synchronous = "NORMAL") -> None:
        if synchronous not in _SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {', '.join(_SYNCHRONOUS)}, got {synchronous!r}")
        self.synchronous = synchronous
        self.path = str(path)
        if self.path == ":memory:":
            self.shared_across_processes = False
        self.identity = f"sqlite:{Path(self.path).resolve() if self.path != ':memory:' else id(self)}"
        self._fast: sqlite3.Connection | None = None  # on the event loop; fails at once when busy
        self._slow: sqlite3.Connection | None = None  # on the worker thread; waits for the lock
        self._executor: ThreadPoolExecutor | None = None
        # The checkpoint queued or running on the worker thread, and the changes counted when it began.
        self._checkpointing: Future[None] | None = None
        self._checkpointed_at = 0
        # The pages the runs' JSON filled in the writes made so far (see ``_logged``).
        self._body_pages = 0
        self._batch: _Batch | None = None  # the writes waiting for the next commit
        self._led: asyncio.AbstractEventLoop | None = None  # its current turn has had its leader
        self.commits = 0
        self.writes = 0

    def __reduce__(self) -> Any:
        # Each process opens its own connection to the same file.
        return (functools.partial(SqliteStore, synchronous=self.synchronous), (self.path,))

    # ---- plumbing -----------------------------------------------------------------------------------

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Read: run ``fn`` on the loop's connection; if the database is busy (rare in WAL mode, and then
        before anything was read), wait for it on the worker thread instead. Writes go through
        ``_write``."""
        try:
            if self._fast is None:
                self._fast = self._open(busy_timeout_ms=0)
            result = fn(self._fast)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or self.path == ":memory:":
                raise self._unavailable(exc) from exc
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.IntegrityError):
                raise
            raise self._unavailable(exc) from exc
        else:
            self._checkpoint_if_due()
            return result
        result = await asyncio.get_running_loop().run_in_executor(self._worker(), self._wait_and_call, fn)
        self._checkpoint_if_due()
        return result

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a transaction: at once and alone if it is the first write of this turn of the
        loop, else in the shared commit at the start of the next turn (see above)."""
        loop = asyncio.get_running_loop()
        batch = self._batch
        if batch is None or batch.loop is not loop:
            if self._led is not loop:  # the first write of this turn of the loop
                self._led = loop
                loop.call_soon(self._next_turn, loop)
                return await self._commit_alone(fn)
            batch = self._batch = _Batch(loop)
            loop.call_soon(self._commit_batch, batch)
        future: asyncio.Future[T] = loop.create_future()
        batch.writes.append(_Write(fn, future))
        return await future

    def _next_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._led is loop:
            self._led = None

    async def _commit_alone(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            outcomes = self._commit_on_loop([fn])
        except sqlite3.OperationalError:  # busy: another process holds the write lock
            # It waits for the lock on the worker thread, as a batch of one: a cancel meanwhile unmakes it.
            future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
            self._wait_for_lock(asyncio.get_running_loop(), [_Write(fn, future)])
            return await future
        self._count(outcomes)
        ok, value = outcomes[0]
        if not ok:
            raise value
        return cast(T, value)

    def _commit_batch(self, batch: _Batch) -> None:
        """On the loop, one turn after the batch's first write: all of its writes in one transaction."""
        if self._batch is batch:
            self._batch = None
        # A write whose caller was cancelled before its turn is not made: the caller was told it failed.
        writes = [write for write in batch.writes if not write.future.cancelled()]
        if not writes:
            return
        try:
            outcomes = self._commit_on_loop(list(writes))
        except sqlite3.OperationalError:
            # Busy: the batch waits for the write lock on the worker thread. Writes asked for meanwhile
            # form the next batch.
            self._wait_for_lock(batch.loop, writes)
            return
        except Exception as exc:  # the database is broken, or could not be opened
            _fail([write.future for write in writes], exc)
            return
        self._answer([write.future for write in writes], outcomes)

    def _wait_for_lock(self, loop: asyncio.AbstractEventLoop, writes: list[_Write]) -> None:
        """Commit ``writes`` on the worker thread, which waits for the write lock; each caller hears its
        outcome on the loop. A write whose caller is cancelled before the lock is got is not made."""
        waited = loop.run_in_executor(
            self._worker(), self._wait_and_call, functools.partial(self._transaction, fns=list(writes))
        )
        waited.add_done_callback(functools.partial(self._answer_waited, [w.future for w in writes]))

    def _commit_on_loop(self, fns: list[Callable[[sqlite3.Connection], Any]]) -> list[_Outcome]:
        """``fns`` in one transaction on the loop's connection. Raises sqlite3's OperationalError if the
        database is busy (nothing has been done then: the caller waits for it on the worker thread),
        StorageUnavailableError if it is broken."""
        try:
            if self._fast is None:
                self._fast = self._open(busy_timeout_ms=0)
            return self._transaction(self._fast, fns)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode == sqlite3.SQLITE_BUSY and self.path != ":memory:":
                raise
            raise self._unavailable(exc) from exc
        except sqlite3.DatabaseError as exc:
            raise self._unavailable(exc) from exc

    def _transaction(
        self, conn: sqlite3.Connection, fns: list[Callable[[sqlite3.Connection], Any]]
    ) -> list[_Outcome]:
        """``fns`` in one transaction, then one COMMIT; several each in a savepoint of its own. What a
        write raises is its outcome (and its changes are undone); what fails the transaction is raised,
        with nothing of it done."""
        conn.execute("BEGIN IMMEDIATE")  # takes the write lock first: a busy database fails here
        try:
            if len(fns) == 1:  # alone: undone with its transaction if it fails, no savepoint needed
                outcomes = [self._outcome(conn, fns[0])]
                conn.execute("COMMIT" if outcomes[0][0] else "ROLLBACK")
            else:
                outcomes = [self._in_savepoint(conn, fn) for fn in fns]
                conn.execute("COMMIT")
        except BaseException:
            # A failed COMMIT may have rolled back already (SQLite says: roll back to be sure).
            if conn.in_transaction:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
        return outcomes

    def _in_savepoint(self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], Any]) -> _Outcome:
        conn.execute("SAVEPOINT write")
        outcome = self._outcome(conn, fn)
        if not outcome[0]:
            conn.execute("ROLLBACK TO write")  # undo this write alone: the others still commit
        conn.execute("RELEASE write")
        return outcome

    def _outcome(self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], Any]) -> _Outcome:
        try:
            return True, fn(conn)
        except Exception as exc:
            # As ``_run`` raises them: a broken database as unavailable, a constraint as itself.
            broken = isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.IntegrityError)
            return False, self._unavailable(exc) if broken else exc

    def _count(self, outcomes: list[_Outcome]) -> None:
        """Once a transaction has ended: ``commits`` and ``writes`` (a lone write that failed was rolled
        back, not committed), and a checkpoint if one is due."""
        made = sum(ok for ok, _ in outcomes)
        self.commits += int(len(outcomes) > 1 or made > 0)
        self.writes += made
        self._checkpoint_if_due()

    def _answer(self, futures: list[asyncio.Future[Any]], outcomes: list[_Outcome]) -> None:
        """After the commit returned: each write's caller gets its own outcome."""
        self._count(outcomes)
        for future, (ok, value) in zip(futures, outcomes, strict=True):
            if future.done():  # its caller was cancelled: the write was not made (``_Write``), or if the
                continue  # cancel came after its transaction took it, made and not heard of
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def _answer_waited(
        self, futures: list[asyncio.Future[Any]], waited: asyncio.Future[list[_Outcome]]
    ) -> None:
        if waited.cancelled():
            _fail(futures, self._unavailable(RuntimeError("the write was cancelled")))
        elif (exc := waited.exception()) is not None:
            _fail(futures, exc)
        else:
            self._answer(futures, waited.result())

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="troupe-sqlite")
        return self._executor

    def _worker_connection(self) -> sqlite3.Connection:
        """The worker thread's connection, opened on first use (on that thread)."""
        if self._slow is None:
            self._slow = self._open(busy_timeout_ms=30_000)
        return self._slow

    def _wait_and_call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return fn(self._worker_connection())
        except sqlite3.IntegrityError:
            raise
        except sqlite3.DatabaseError as exc:
            raise self._unavailable(exc) from exc

    def _checkpoint_if_due(self) -> None:
        """Queue a checkpoint on the worker thread once the log gained enough pages since the last one
        began."""
        if self.path == ":memory:" or (self._checkpointing is not None and not self._checkpointing.done()):
            return
        logged = self._logged()
        if logged - self._checkpointed_at < CHECKPOINT_EVERY_PAGES:
            return
        self._checkpointed_at = logged
        # A concurrent future, not the event loop's: the store outlives any one loop.
        self._checkpointing = self._worker().submit(self._checkpoint)

    def _logged(self) -> int:
        """The pages written to the log so far, as estimated from what the store knows without asking
        SQLite: a page per changed row (the row, or an entry of an index, a counter or the change log;
        the triggers' rows count too), plus the pages the runs' JSON filled. The rows alone would let a
        run with a long conversation (tens of pages a write) fill the log to the backstop."""
        changes = sum(conn.total_changes for conn in (self._fast, self._slow) if conn is not None)
        return changes + self._body_pages

    def _checkpoint(self) -> None:
        """On the worker thread. A checkpoint that fails loses nothing (the log keeps every commit): it
        is logged, and the next one tries again; a broken database fails the next call that uses it."""
        try:
            self._worker_connection().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except (sqlite3.Error, OSError) as exc:
            log.warning("SQLite store %s: WAL checkpoint failed: %s", self.path, exc)

    def _unavailable(self, exc: Exception) -> StorageUnavailableError:
        error = StorageUnavailableError(f"SQLite store {self.path} failed: {exc}", path=self.path)
        error.__cause__ = exc  # also where it is handed to a future rather than raised
        return error

    def _open(self, busy_timeout_ms: int) -> sqlite3.Connection:
        if self.path != ":memory:":
            try:
                create_private(Path(self.path))
            except OSError as exc:  # its folder cannot be made, or the file cannot be (a full disk, say)
                raise self._unavailable(exc) from exc
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")  # one of _SYNCHRONOUS, checked above
            conn.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
            conn.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
            refuse_newer(conn, self.path)
            conn.executescript(_SCHEMA)
            conn.executescript(_LINKS_SCHEMA)
            prepare(conn)  # the listings' indexes, counters and change log (troupe.storage.sqlite_listing)
        except BaseException:
            conn.close()
            raise
        return conn

    # ---- runs ---------------------------------------------------------------------------------------

    async def create_run(self, state: RunState | RunRecord) -> int:
        return await self.save_run(state, expected_version=0)

    async def load_run(self, run_id: str) -> StoredRun | None:
        def select(conn: sqlite3.Connection) -> tuple[str, int] | None:
            return conn.execute("SELECT body, version FROM runs WHERE run_id = ?", (run_id,)).fetchone()

        found = await self._run(select)
        return None if found is None else StoredRun(RunState.from_json(found[0]), found[1])

    async def save_run(
        self,
        state: RunState | RunRecord,
        *,
        expected_version: int,
        audit: tuple[AuditEntry, ...] = (),
        thread: ThreadAppend | None = None,
        outbox: tuple[OutboxEntry, ...] = (),
    ) -> int:
        version = expected_version + 1
        record = as_record(state)
        run_id = record.run_id
        row = _row(record, version)
        entries = [(a.run_id, a.model_dump_json()) for a in audit]
        # The row's pages beyond the first (see _logged); an update writes them twice over: the new row's
        # pages, and the freelist's record of the old ones.
        pages = len(record.json) // PAGE_BYTES * (1 if expected_version == 0 else 2)

        def update(conn: sqlite3.Connection) -> int:
            if expected_version == 0:
                _insert_run(conn, run_id, row)
            else:
                cursor = conn.execute(
                    "UPDATE runs SET agent_id=?, status=?, thread_id=?, resource_id=?, suspended_at=?, "
                    "version=?, body=?, expires_at=?, top=? WHERE run_id=? AND version=?",
                    (*row[1:], run_id, expected_version),
                )
                if cursor.rowcount != 1:
                    raise StaleSnapshotError(
                        f"run {run_id} is not at version {expected_version}", run_id=run_id
                    )
            keep_roles(conn, record)
            # Each statement costs its preparation even with nothing to insert: most writes have none.
            if entries:
                conn.executemany("INSERT INTO audit (run_id, body) VALUES (?, ?)", entries)
            _insert_thread(conn, thread)
            if outbox:
                conn.executemany(
                    "INSERT OR IGNORE INTO outbox (id, run_id, status, due, lease_owner, body) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    [_outbox_row(e) for e in outbox],
                )
            self._body_pages += pages
            return version

        return await self._write(update)

    async def delete_run(
        self, run_id: str, *, expected_version: int | None = None, thread: ThreadAppend | None = None
    ) -> None:
        def delete(conn: sqlite3.Connection) -> None:
            found = conn.execute("SELECT version FROM runs WHERE run_id = ?", (run_id,)).fetchone()
            if found is None:
                return  # already gone, and with it whatever its deletion appended
            if expected_version is not None and found[0] != expected_version:
                raise StaleSnapshotError(f"run {run_id} is not at version {expected_version}", run_id=run_id)
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))  # its roles with it (a trigger)
            conn.execute("INSERT OR IGNORE INTO finished_runs (run_id) VALUES (?)", (run_id,))
            _insert_thread(conn, thread)

        await self._write(delete)

    async def list_suspended_runs(self, query: SuspendedRunQuery) -> tuple[list[RunState], int]:
        return await suspended_runs(self, query)

    async def list_paused(self, query: PausedQuery) -> PausedPage:
        bodies, total, cursor = await self._run(functools.partial(read_page, query=query))
        return PausedPage(readable(bodies), total, cursor)

    async def paused_changes(self, after: str | None, limit: int) -> PausedChanges:
        return await self._run(functools.partial(read_changes, after=after, limit=limit))

    async def list_expiring_runs(self, agent_id: str, before: float) -> list[str]:
        def select(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT run_id FROM runs INDEXED BY expiring_by_agent WHERE agent_id = ? "
                "AND status = 'suspended' AND expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at",
                (agent_id, before),
            ).fetchall()
            return [r[0] for r in rows]

        return await self._run(select)

    async def list_running_runs(self, agent_id: str) -> list[str]:
        def select(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute(
                "SELECT run_id FROM runs INDEXED BY running_by_agent WHERE agent_id = ? "
                "AND status = 'running' ORDER BY run_id",
                (agent_id,),
            ).fetchall()
            return [r[0] for r in rows]

        return await self._run(select)

    # ---- audit and threads --------------------------------------------------------------------------

    async def append_audit(self, entry: AuditEntry) -> None:
        def insert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO audit (run_id, body) VALUES (?, ?)", (entry.run_id, entry.model_dump_json())
            )

        await self._write(insert)

    async def list_audit(self, run_id: str) -> list[AuditEntry]:
        def select(conn: sqlite3.Connection) -> list[str]:
            return [
                r[0] for r in conn.execute("SELECT body FROM audit WHERE run_id = ? ORDER BY id", (run_id,))
            ]

        return [AuditEntry.model_validate_json(b) for b in await self._run(select)]

    # ---- outbox -------------------------------------------------------------------------------------

    async def claim_deliveries(
        self, owner: str, now: float, lease_s: float, limit: int, *, target: str | None = None
    ) -> list[OutboxEntry]:
        # One target's entries: read from the stored JSON (the outbox has no column for it).
        only = "" if target is None else "AND json_extract(body, '$.target') = ? "
        params = (now, limit) if target is None else (now, target, limit)

        def claim(conn: sqlite3.Connection) -> list[OutboxEntry]:
            rows = conn.execute(
                f"SELECT body FROM outbox WHERE status = 'pending' AND due <= ? {only}ORDER BY due LIMIT ?",
                params,
            ).fetchall()
            claimed = [OutboxEntry.model_validate_json(r[0]).leased(owner, now + lease_s) for r in rows]
            for entry in claimed:
                _write_outbox(conn, entry)
            return claimed

        return await self._write(claim)

    async def settle_delivery(self, entry: OutboxEntry) -> bool:
        def settle(conn: sqlite3.Connection) -> bool:
            found = conn.execute("SELECT lease_owner FROM outbox WHERE id = ?", (entry.id,)).fetchone()
            if found is None or found[0] != entry.lease_owner:
                return False
            _write_outbox(conn, entry.released())
            return True

        return await self._write(settle)

    async def list_deliveries(self, run_id: str) -> list[OutboxEntry]:
        def select(conn: sqlite3.Connection) -> list[str]:
            return [
                r[0] for r in conn.execute("SELECT body FROM outbox WHERE run_id = ? ORDER BY seq", (run_id,))
            ]

        return [OutboxEntry.model_validate_json(b) for b in await self._run(select)]

    async def redeliver(self, delivery_id: str, now: float) -> OutboxEntry | None:
        def requeue(conn: sqlite3.Connection) -> OutboxEntry | None:
            found = conn.execute("SELECT body FROM outbox WHERE id = ?", (delivery_id,)).fetchone()
            if found is None:
                return None
            again = OutboxEntry.model_validate_json(found[0]).requeued(now)
            _write_outbox(conn, again)
            return again

        return await self._write(requeue)

    async def prune_deliveries(self, now: float, keep_s: float, limit: int) -> int:
        oldest = "SELECT seq FROM outbox WHERE status = 'delivered' AND due <= ? {} ORDER BY due LIMIT ?"

        def prune(conn: sqlite3.Connection) -> int:
            # Entries of finished runs go; those of runs still alive are looked at again later.
            finished = oldest.format("AND run_id NOT IN (SELECT run_id FROM runs)")
            deleted = conn.execute(f"DELETE FROM outbox WHERE seq IN ({finished})", (now - keep_s, limit))
            alive = oldest.format("AND run_id IN (SELECT run_id FROM runs)")
            conn.execute(f"UPDATE outbox SET due = ? WHERE seq IN ({alive})", (now, now - keep_s, limit))
            return deleted.rowcount

        return await self._write(prune)

    async def touch_owner(self, owner: str, ttl_s: float) -> None:
        def upsert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO owners VALUES (?, ?) "
                "ON CONFLICT(owner) DO UPDATE SET expires_at = excluded.expires_at",
                (owner, time.time() + ttl_s),
            )

        await self._write(upsert)

    async def live_owners(self) -> set[str]:
        def forget_expired(conn: sqlite3.Connection) -> set[str]:
            now = time.time()
            conn.execute("DELETE FROM owners WHERE expires_at <= ?", (now,))
            return {r[0] for r in conn.execute("SELECT owner FROM owners")}

        return await self._write(forget_expired)

    async def append_messages(
        self, thread_id: str, resource_id: str | None, messages: list[dict[str, Any]]
    ) -> None:
        def insert(conn: sqlite3.Connection) -> None:
            _insert_thread(conn, ThreadAppend(thread_id, resource_id, messages))

        await self._write(insert)

    async def load_messages(self, thread_id: str) -> list[dict[str, Any]]:
        def select(conn: sqlite3.Connection) -> list[str]:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT body FROM messages WHERE thread_id = ? ORDER BY id", (thread_id,)
                )
            ]

        return [json.loads(b) for b in await self._run(select)]

    async def thread_resource(self, thread_id: str) -> str | None:
        def select(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT COALESCE(resource_id, '') FROM messages WHERE thread_id = ? ORDER BY id LIMIT 1",
                (thread_id,),
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._run(select)

    # ---- decision links -----------------------------------------------------------------------------

    async def issue_link(self, record: LinkRecord) -> LinkRecord:
        def issue(conn: sqlite3.Connection) -> str:
            conn.execute("DELETE FROM links WHERE forget_at <= ?", (time.time(),))
            conn.execute(
                "INSERT OR IGNORE INTO links (id, forget_at, body) VALUES (?, ?, ?)",
                (record.id, record.forget_at(), record.model_dump_json()),
            )
            return str(conn.execute("SELECT body FROM links WHERE id = ?", (record.id,)).fetchone()[0])

        return LinkRecord.model_validate_json(await self._write(issue))

    async def load_link(self, link_id: str) -> LinkRecord | None:
        def select(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT body FROM links WHERE id = ?", (link_id,)).fetchone()
            return None if row is None else str(row[0])

        raw = await self._run(select)
        return None if raw is None else LinkRecord.model_validate_json(raw)

    async def use_link(self, link_id: str, who: str, now: float) -> LinkRecord | None:
        def use(conn: sqlite3.Connection) -> LinkRecord | None:
            row = conn.execute("SELECT body FROM links WHERE id = ?", (link_id,)).fetchone()
            record = None if row is None else LinkRecord.model_validate_json(row[0])
            if record is None or not record.usable_by(who, now):
                return None
            record.used_by.append(who)
            conn.execute("UPDATE links SET body = ? WHERE id = ?", (record.model_dump_json(), link_id))
            return record

        return await self._write(use)

    async def release_link(self, link_id: str, who: str) -> None:
        def release(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT body FROM links WHERE id = ?", (link_id,)).fetchone()
            record = None if row is None else LinkRecord.model_validate_json(row[0])
            if record is not None and who in record.used_by:
                record.used_by.remove(who)
                conn.execute("UPDATE links SET body = ? WHERE id = ?", (record.model_dump_json(), link_id))

        await self._write(release)

    async def close(self) -> None:
        if self._batch is not None and self._batch.loop is asyncio.get_running_loop():
            self._commit_batch(self._batch)  # writes still waiting for their commit get it first
        if self._checkpointing is not None:
            # Before the worker's connection closes: it is the one checkpointing.
            await asyncio.wrap_future(self._checkpointing)
            self._checkpointing = None
        self._checkpointed_at = self._body_pages = 0  # connections opened again count from nothing
        if self._fast is not None:
            self._fast.close()
            self._fast = None
        if self._executor is not None:
            executor, self._executor = self._executor, None
            slow, self._slow = self._slow, None
            if slow is not None:
                await asyncio.get_running_loop().run_in_executor(executor, slow.close)
            executor.shutdown(wait=False)


def _fail(futures: list[asyncio.Future[Any]], exc: BaseException) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(exc)


def _insert_run(conn: sqlite3.Connection, run_id: str, row: tuple[Any, ...]) -> None:
    """A run's first write. A finished run's id stays taken (its tombstone), so one audit trail is one
    run's."""
    try:
        added = conn.execute(
            f"INSERT INTO runs ({_COLUMNS}) SELECT {', '.join('?' * len(row))} "
            "WHERE NOT EXISTS (SELECT 1 FROM finished_runs WHERE run_id = ?)",
            (*row, run_id),
        ).rowcount
    except sqlite3.IntegrityError:
        added = 0
    if not added:
        raise DuplicateRunError(f"run {run_id} already exists", run_id=run_id)


def _insert_thread(conn: sqlite3.Connection, thread: ThreadAppend | None) -> None:
    if thread is not None and thread.messages:
        conn.executemany(
            "INSERT INTO messages (thread_id, resource_id, body) VALUES (?, ?, ?)",
            [(thread.thread_id, thread.resource_id, json.dumps(m)) for m in thread.messages],
        )


def _outbox_row(entry: OutboxEntry) -> tuple[Any, ...]:
    return (entry.id, entry.run_id, entry.status, _when(entry), entry.lease_owner, entry.model_dump_json())


def _when(entry: OutboxEntry) -> float:
    """The ``due`` column: when a pending entry may be taken, when a delivered one was delivered (so the
    (status, due) index serves both claims and pruning)."""
    if entry.status == "delivered" and entry.delivered_at is not None:
        return entry.delivered_at
    return entry.due_at()


def _write_outbox(conn: sqlite3.Connection, entry: OutboxEntry) -> None:
    conn.execute(
        "UPDATE outbox SET status = ?, due = ?, lease_owner = ?, body = ? WHERE id = ?",
        (entry.status, _when(entry), entry.lease_owner, entry.model_dump_json(), entry.id),
    )


def _row(record: RunRecord, version: int) -> tuple[Any, ...]:
    return (
        record.run_id,
        record.agent_id,
        record.status,
        record.thread_id,
        record.resource_id,
        record.paused_at,
        version,
        record.json,
        record.expires_at,
        int(record.top_level),
    )


_COLUMNS = "run_id, agent_id, status, thread_id, resource_id, suspended_at, version, body, expires_at, top"


# Decision links' records (see ``issue_link``), deleted once ``forget_at`` has passed.
_LINKS_SCHEMA = """
CREATE TABLE IF NOT EXISTS links (
    id TEXT PRIMARY KEY,
    forget_at REAL NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS links_by_forget_at ON links (forget_at);
"""


__all__ = ["SqliteStore"]
