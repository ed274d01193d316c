"""SqliteStore's listings of paused runs: partial indexes, counters and a change log, kept by SQLite.

**Indexes.** The listings ``PausedQuery`` can ask for (``troupe.core.vocabulary.listing.IndexKey``) are
read from partial indexes over the ``runs`` table holding only the rows a listing shows (suspended, with
a pause time), by agent, by agent and resource, by agent and thread, and over all agents, each ordered
by (top-level or not, pause time, run id): a listing of top-level runs is one range, a listing of all
runs two, merged. Roles, which a run may have several of, are rows of ``paused_roles`` with indexes of
their own. A page is one seek and ``LIMIT`` rows per range (the index is named with ``INDEXED BY``, so
the planner never falls back to another). Being partial, the indexes cost nothing to the writes of
running runs (a run's checkpoints between its pauses), which used to rewrite five full indexes each (and
move the run's entries in them when it paused or resumed).

**Roles.** A run's rows in ``paused_roles`` exist only while it is listed: its write adds them
(``keep_roles``), and the triggers that see it leave the listings, or be listed again, take the old ones
out. A write of a run that is not listed (its start, the checkpoint after its tools) has none to take
out and runs no statement for them.

**Counters.** ``paused_counts`` holds how many runs each index has, kept by triggers on ``runs`` and
``paused_roles`` in the same transaction as the write, so a listing's ``total`` is a lookup. A thread
and a pause-time range have no counter: they are counted from their index range (a thread's runs, the
runs in the range).

**Change log.** Every write that lists a run, or takes it out, adds a row to ``paused_changes`` (a
trigger again; ``AUTOINCREMENT``, so a position never comes back), and the log keeps the last
``KEEP_CHANGES`` rows: each new row deletes the one ``KEEP_CHANGES`` before it. SQLite commits one
writer at a time, so a reader sees the log grow in order.

**Schema versions.** ``PRAGMA user_version`` says which schema a file has; an older file is brought up
to this one once, in one transaction (``prepare``). From version 1: the ``top`` column, the new indexes
and counters (counted from the rows there), and the old full indexes dropped. From version 2: the
triggers made again (they now take a run's roles out). A file of a later version (a newer Troupe's) is
refused before anything is written to it (``refuse_newer``).
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any

from troupe.core.vocabulary.errors import InvalidPaginationError, StorageError
from troupe.core.vocabulary.listing import (
    KEEP_CHANGES,
    IndexKey,
    PausedChange,
    PausedChanges,
    PausedQuery,
    Place,
    page_of,
)
from troupe.core.vocabulary.run_record import RunRecord
from troupe.core.vocabulary.state import RunState

SCHEMA_VERSION = 3
LISTED = "status = 'suspended' AND suspended_at IS NOT NULL"

# The indexes of listed runs, by the filters they serve (agent, resource, thread): (name, columns, the
# rows it holds beyond LISTED). ``top`` comes before the pause time, so a listing of top-level runs is one
# range and a listing of all runs two (merged): one index serves both, and a run's claim takes it out of
# three indexes (four on a thread), not six: at 20,000 runs each is a leaf page of its own to write.
# ``status`` last, so that a page's places are read from the index alone (a covering index).
_RUN_INDEXES = {
    (False, False, False): ("paused_all", "top, suspended_at, run_id, status", ""),
    (True, False, False): ("paused_by_agent", "agent_id, top, suspended_at, run_id, status", ""),
    (True, True, False): (
        "paused_by_resource",
        "agent_id, resource_id, top, suspended_at, run_id, status",
        " AND resource_id IS NOT NULL",
    ),
    (True, False, True): (
        "paused_by_thread",
        "agent_id, thread_id, suspended_at, run_id, status",
        " AND thread_id IS NOT NULL",
    ),
}
_ROLE_INDEXES = {
    False: ("paused_roles_by_agent", "agent_id, role, suspended_at, run_id"),
    True: ("paused_roles_by_resource", "agent_id, resource_id, role, suspended_at, run_id"),
}

# The counters a run's row keeps: (key, when it counts), as SQL over the trigger's ``{r}`` (new or old).
_US = " || char(31) || "
_RUN_COUNTERS = [
    ("'all'", "1"),
    (f"'a'{_US}{{r}}.agent_id", "1"),
    (f"'ar'{_US}{{r}}.agent_id{_US}{{r}}.resource_id", "{r}.resource_id IS NOT NULL"),
    ("'top'", "{r}.top = 1"),
    (f"'ta'{_US}{{r}}.agent_id", "{r}.top = 1"),
    (f"'tar'{_US}{{r}}.agent_id{_US}{{r}}.resource_id", "{r}.top = 1 AND {r}.resource_id IS NOT NULL"),
]
_ROLE_COUNTERS = [
    (f"'tao'{_US}{{r}}.agent_id{_US}{{r}}.role", "1"),
    (f"'taro'{_US}{{r}}.agent_id{_US}{{r}}.resource_id{_US}{{r}}.role", "{r}.resource_id IS NOT NULL"),
]


def count_key(key: IndexKey) -> str | None:
    """The counter of an index, as the triggers name it; None for a thread's (counted from its index)."""
    if key.thread is not None:
        return None
    parts = ["t" if key.top_level else "", "a" if key.agent is not None else ""]
    parts += ["r" if key.resource is not None else "", "o" if key.role is not None else ""]
    tag = "".join(parts)
    values = [v for v in (key.agent, key.resource, key.role) if v is not None]
    if not tag:
        return "all"
    return "\x1f".join([tag if tag != "t" else "top", *values])


def _listed(r: str) -> str:
    return f"{r}.status = 'suspended' AND {r}.suspended_at IS NOT NULL"


def _count_up(counters: list[tuple[str, str]], r: str, when: str = "1") -> list[str]:
    return [
        f"INSERT INTO paused_counts (key, n) SELECT {key.format(r=r)}, 1 WHERE ({when}) AND "
        f"{cond.format(r=r)} ON CONFLICT (key) DO UPDATE SET n = n + 1;"
        for key, cond in counters
    ]


def _count_down(counters: list[tuple[str, str]], r: str, when: str = "1") -> list[str]:
    return [
        f"UPDATE paused_counts SET n = n - 1 WHERE ({when}) AND {cond.format(r=r)} "
        f"AND key = {key.format(r=r)};"
        for key, cond in counters
    ]


def _drop_roles(r: str) -> str:
    return f"DELETE FROM paused_roles WHERE run_id = {r}.run_id;"


def _log(r: str, listed: str, when: str = "1") -> list[str]:
    """Log the row ``r`` as ``listed`` (when ``when`` holds), and drop the entry the log no longer keeps."""
    return [
        "INSERT INTO paused_changes (run_id, listed, agent_id, resource_id, top) "
        f"SELECT {r}.run_id, {listed}, {r}.agent_id, {r}.resource_id, {r}.top WHERE {when};",
        f"DELETE FROM paused_changes WHERE seq <= last_insert_rowid() - {KEEP_CHANGES};",
    ]


def _trigger(name: str, event: str, when: str, body: list[str]) -> str:
    return (
        f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} WHEN {when} BEGIN\n  "
        + "\n  ".join(body)
        + "\nEND"
    )


def _statements() -> list[str]:
    made = [
        f"CREATE INDEX IF NOT EXISTS {name} ON runs ({columns}) WHERE {LISTED}{extra}"
        for name, columns, extra in _RUN_INDEXES.values()
    ]
    made += [
        "CREATE INDEX IF NOT EXISTS running_by_agent ON runs (agent_id, run_id) WHERE status = 'running'",
        "CREATE INDEX IF NOT EXISTS expiring_by_agent ON runs (agent_id, expires_at) "
        "WHERE status = 'suspended' AND expires_at IS NOT NULL",
        "CREATE TABLE IF NOT EXISTS paused_roles (run_id TEXT NOT NULL, role TEXT NOT NULL, "
        "agent_id TEXT NOT NULL, resource_id TEXT, suspended_at REAL NOT NULL, PRIMARY KEY (run_id, role)) "
        "WITHOUT ROWID",
        *(f"CREATE INDEX IF NOT EXISTS {n} ON paused_roles ({c})" for n, c in _ROLE_INDEXES.values()),
        "CREATE TABLE IF NOT EXISTS paused_counts (key TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID",
        "CREATE TABLE IF NOT EXISTS paused_changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
        "run_id TEXT NOT NULL, listed INTEGER NOT NULL, agent_id TEXT NOT NULL, resource_id TEXT, "
        "top INTEGER NOT NULL)",
    ]
    new, old = _listed("new"), _listed("old")
    made += [
        _trigger(
            "runs_listed_insert", "INSERT ON runs", new, [*_count_up(_RUN_COUNTERS, "new"), *_log("new", "1")]
        ),
        _trigger(
            "runs_listed_delete",
            "DELETE ON runs",
            old,
            [_drop_roles("old"), *_count_down(_RUN_COUNTERS, "old"), *_log("old", "0")],
        ),
        _trigger(
            "runs_listed_update",
            "UPDATE ON runs",
            f"({old}) OR ({new})",
            [
                # Listed before, or now: the write adds the roles it is listed under (keep_roles).
                _drop_roles("old"),
                *_count_down(_RUN_COUNTERS, "old", old),
                *_count_up(_RUN_COUNTERS, "new", new),
                # Listed now: as it is now; left the listings: as it was listed (what readers filter on).
                *_log("new", "1", new),
                *_log("old", "0", f"NOT ({new})"),
            ],
        ),
        _trigger("paused_roles_insert", "INSERT ON paused_roles", "1", _count_up(_ROLE_COUNTERS, "new")),
        _trigger("paused_roles_delete", "DELETE ON paused_roles", "1", _count_down(_ROLE_COUNTERS, "old")),
    ]
    return made


# Made again from version 2 on: their bodies changed.
_TRIGGERS = ("runs_listed_insert", "runs_listed_delete", "runs_listed_update")
_OLD_INDEXES = ("runs_by_agent", "runs_by_thread", "runs_by_resource", "runs_by_expiry", "runs_by_pause")


def refuse_newer(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a file of a later schema version than ``SCHEMA_VERSION`` (a newer Troupe's), before anything
    is written to it: this Troupe's writes would not keep what that version keeps (its indexes, counters,
    triggers), and the newer Troupe would then read it wrong."""
    found = conn.execute("PRAGMA user_version").fetchone()[0]
    if found > SCHEMA_VERSION:
        raise StorageError(
            f"SQLite store {path} has schema version {found}, written by a newer Troupe; this Troupe "
            f"reads versions up to {SCHEMA_VERSION} (upgrade it, or give it another file)",
            path=path,
            schema_version=found,
        )


def prepare(conn: sqlite3.Connection) -> None:
    """Bring the file's schema up to ``SCHEMA_VERSION`` (once per file; concurrent openers wait for the
    first, then find it done). The base tables exist already (``SqliteStore``'s own schema)."""
    if conn.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")  # busy: the caller waits for the lock (SqliteStore's worker)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version < SCHEMA_VERSION:
            _migrate(conn, version)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    for name in _TRIGGERS:  # made again below, with this version's bodies
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    if version < 2:
        _columns_and_old_indexes(conn)
    for statement in _statements():
        conn.execute(statement)
    if version < 2:
        _count_listed(conn)


def _columns_and_old_indexes(conn: sqlite3.Connection) -> None:
    """A file from before paged listings: the columns they read, and the full indexes they replace."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    for column, kind in (("expires_at", "REAL"), ("top", "INTEGER NOT NULL DEFAULT 1")):
        if column not in columns:
            conn.execute(f"ALTER TABLE runs ADD COLUMN {column} {kind}")
    for name in _OLD_INDEXES:
        conn.execute(f"DROP INDEX IF EXISTS {name}")
    # Runs listed before the column was there: a subagent's is not top-level (parsed once, here).
    listed = conn.execute(f"SELECT run_id, body FROM runs WHERE {LISTED}").fetchall()
    children = [(run_id,) for run_id, body in listed if RunState.from_json(body).parent is not None]
    conn.executemany("UPDATE runs SET top = 0 WHERE run_id = ?", children)


def _count_listed(conn: sqlite3.Connection) -> None:
    """The counters, counted from the rows there (the triggers count from now on)."""
    conn.execute("DELETE FROM paused_counts")
    for key, cond in _RUN_COUNTERS:
        conn.execute(
            f"INSERT INTO paused_counts (key, n) SELECT {key.format(r='runs')}, COUNT(*) FROM runs "
            f"WHERE {LISTED} AND {cond.format(r='runs')} GROUP BY 1"
        )
    for key, cond in _ROLE_COUNTERS:
        conn.execute(
            f"INSERT INTO paused_counts (key, n) SELECT {key.format(r='paused_roles')}, COUNT(*) "
            f"FROM paused_roles WHERE {cond.format(r='paused_roles')} GROUP BY 1 "
            "ON CONFLICT (key) DO UPDATE SET n = excluded.n"
        )


# ---- in a write ------------------------------------------------------------------------------------------


def keep_roles(conn: sqlite3.Connection, record: RunRecord) -> None:
    """The run's rows in ``paused_roles`` while it is listed (``record.roles``, as ``pause_roles`` gives
    them). In the run's write, after its row: the trigger that saw the row took the old ones out."""
    at = record.paused_at
    if record.roles and at is not None:
        conn.executemany(
            "INSERT INTO paused_roles (run_id, role, agent_id, resource_id, suspended_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [(record.run_id, role, record.agent_id, record.resource_id, at) for role in record.roles],
        )


# ---- reading a page --------------------------------------------------------------------------------------


def read_page(conn: sqlite3.Connection, query: PausedQuery) -> tuple[list[str], int, str | None]:
    """The page's runs (their JSON, in order), the total and the next page's cursor, in one read
    transaction so that all are of the same moment. Each range gives its first ``query.wanted()``
    places from its index alone (the indexes hold every column the seek and the order need); only the
    page's runs are then read from the table, by id."""
    conn.execute("BEGIN")
    try:
        places: list[tuple[Place, str]] = []
        total = 0
        for key in query.index_keys():
            for source in _sources(key):
                sql, params = _select(source, query)
                places += [(Place(at, run_id), run_id) for at, run_id in conn.execute(sql, params)]
            total += _total(conn, key, query)
        chosen, cursor = page_of(places, query)
        marks = ", ".join("?" * len(chosen))
        found = dict(conn.execute(f"SELECT run_id, body FROM runs WHERE run_id IN ({marks})", chosen))
        return [found[run_id] for run_id in chosen if run_id in found], total, cursor
    finally:
        conn.execute("COMMIT")


Source = tuple[str, list[str], list[Any]]


def _sources(key: IndexKey) -> list[Source]:
    """FROM, and WHERE terms with their values, of each index range whose union is one listing (without
    pause times and cursor): one range, or two (top-level runs and the others) merged."""
    values: list[Any]
    if key.role is not None:
        name, _ = _ROLE_INDEXES[key.resource is not None]
        terms, values = ["p.agent_id = ?", "p.role = ?"], [key.agent, key.role]
        if key.resource is not None:
            terms.append("p.resource_id = ?")
            values.append(key.resource)
        return [(f"paused_roles AS p INDEXED BY {name}", terms, values)]
    shape = (key.agent is not None, key.resource is not None and key.thread is None, key.thread is not None)
    name, _, extra = _RUN_INDEXES[shape]  # a thread with a resource: the thread's index, filtered
    terms = [_listed("p")] + ([f"p.{extra.removeprefix(' AND ')}"] if extra else [])
    values = []
    for column, value in (("agent_id", key.agent), ("resource_id", key.resource), ("thread_id", key.thread)):
        if value is not None:
            terms.append(f"p.{column} = ?")
            values.append(value)
    source = f"runs AS p INDEXED BY {name}"
    if key.thread is not None:
        return [(source, terms, values)]
    tops = [1] if key.top_level else [0, 1]
    return [(source, [*terms, "p.top = ?"], [*values, top]) for top in tops]


def _times(query: PausedQuery) -> tuple[list[str], list[float]]:
    low, high = query.bounds()
    terms, values = [], []
    if low != -math.inf:
        terms.append("p.suspended_at >= ?")
        values.append(low)
    if high != math.inf:
        terms.append("p.suspended_at <= ?")
        values.append(high)
    return terms, values


def _select(found: Source, query: PausedQuery) -> tuple[str, list[Any]]:
    source, terms, values = found
    times, stamps = _times(query)
    terms = [*terms, *times]
    values = [*values, *stamps]
    start = query.after()
    if query.order == "oldest":
        order = "p.suspended_at, p.run_id"
        if start is not None:
            terms.append("(p.suspended_at, p.run_id) > (?, ?)")
            values += [start.at, start.run_id]
    else:
        order = "p.suspended_at DESC, p.run_id"
        if start is not None:
            # The plain bound lets the planner seek; the rest places ties by id.
            terms.append(
                "p.suspended_at <= ? AND (p.suspended_at < ? OR (p.suspended_at = ? AND p.run_id > ?))"
            )
            values += [start.at, start.at, start.at, start.run_id]
    where = " AND ".join(terms)
    sql = f"SELECT p.suspended_at, p.run_id FROM {source} WHERE {where} ORDER BY {order} LIMIT ?"
    return sql, [*values, query.wanted()]


def _total(conn: sqlite3.Connection, key: IndexKey, query: PausedQuery) -> int:
    counter = count_key(key)
    if counter is not None and query.from_date is None and query.to_date is None:
        found = conn.execute("SELECT n FROM paused_counts WHERE key = ?", (counter,)).fetchone()
        return int(found[0]) if found else 0
    times, stamps = _times(query)
    counted = 0
    for source, terms, values in _sources(key):
        where = " AND ".join([*terms, *times])
        counted += conn.execute(
            f"SELECT COUNT(*) FROM {source} WHERE {where}", [*values, *stamps]
        ).fetchone()[0]
    return int(counted)


# ---- the change log --------------------------------------------------------------------------------------


def read_changes(conn: sqlite3.Connection, after: str | None, limit: int) -> PausedChanges:
    conn.execute("BEGIN")
    try:
        found = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'paused_changes'").fetchone()
        end = int(found[0]) if found else 0
        if after is None:
            return PausedChanges([], str(end))
        seen = _position(after)
        oldest = conn.execute("SELECT seq FROM paused_changes ORDER BY seq LIMIT 1").fetchone()
        if seen > end or (oldest is not None and seen < oldest[0] - 1):
            return PausedChanges([], str(end), complete=False)
        rows = conn.execute(
            "SELECT seq, run_id, listed, agent_id, resource_id, top FROM paused_changes WHERE seq > ? "
            "ORDER BY seq LIMIT ?",
            (seen, limit),
        ).fetchall()
    finally:
        conn.execute("COMMIT")
    changes = [
        PausedChange(run_id, bool(listed), agent, resource, bool(top))
        for _, run_id, listed, agent, resource, top in rows
    ]
    return PausedChanges(changes, str(rows[-1][0] if rows else seen))


def _position(after: str) -> int:
    try:
        return int(after)
    except (TypeError, ValueError):
        raise InvalidPaginationError(f"not a position in this store's change log: {after!r}") from None


__all__ = [
    "LISTED",
    "SCHEMA_VERSION",
    "count_key",
    "keep_roles",
    "prepare",
    "read_changes",
    "read_page",
    "refuse_newer",
]
