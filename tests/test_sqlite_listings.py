"""SqliteStore's listings kept by SQLite itself: a file from before them is brought up to date once, and
what a listing reads is one seek into an index whatever the file holds (counted by SQLite's own virtual
machine steps, not timed)."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers import RecordInput
from troupe.core.vocabulary.listing import PausedQuery
from troupe.core.vocabulary.state import CallStatus, ParentLink, Pause, RunState, ToolCallState
from troupe.storage import sqlite as sqlite_store
from troupe.storage.sqlite_listing import SCHEMA_VERSION

from troupe import Agent, Runtime, SqliteStore, create_tool
from troupe.testing import FunctionModel, text, tool_call

T0 = datetime(2026, 1, 1, tzinfo=UTC)

# The runs table and its indexes as Troupe wrote them before paged listings (schema version 0).
OLD_SCHEMA = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, status TEXT NOT NULL, thread_id TEXT,
    resource_id TEXT, suspended_at REAL, version INTEGER NOT NULL, body TEXT NOT NULL, expires_at REAL
);
CREATE INDEX runs_by_agent ON runs (agent_id, status, suspended_at);
CREATE INDEX runs_by_thread ON runs (agent_id, thread_id, status, suspended_at);
CREATE INDEX runs_by_resource ON runs (agent_id, resource_id, status, suspended_at);
CREATE INDEX runs_by_expiry ON runs (agent_id, status, expires_at);
CREATE INDEX runs_by_pause ON runs (status, suspended_at);
"""


def paused(run_id: str, minutes: int, **fields: object) -> RunState:
    at = T0.replace(minute=minutes)
    pause = Pause(
        kind="approval", tool_name="t", args={}, agent_path=["a"], fingerprint="f" * 32, paused_at=at
    )
    call = ToolCallState(
        tool_call_id="c1", tool_name="t", args={}, status=CallStatus.AWAITING_APPROVAL, pauses=[pause]
    )
    return RunState(run_id=run_id, agent_id="a", status="suspended", calls=[call], **fields)  # type: ignore[arg-type]


async def test_a_file_from_before_paged_listings_is_brought_up_to_date_once(tmp_path: Path):
    db = tmp_path / "old.db"
    runs = [
        paused("top", 1, resource_id="u1"),
        paused("child", 2, resource_id="u1", parent=ParentLink(run_id="p", tool_call_id="d1", agent_id="s")),
        RunState(run_id="busy", agent_id="a"),
    ]
    with closing(sqlite3.connect(db)) as old:
        old.executescript(OLD_SCHEMA)
        for state in runs:
            at = state.suspended_at.timestamp() if state.suspended_at else None
            old.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (state.run_id, "a", state.status, None, state.resource_id, at, 4, state.to_json(), None),
            )
        old.commit()

    store = SqliteStore(db)
    try:
        top = await store.list_paused(PausedQuery(agents=("a",), top_level=True, resources=("u1",)))
        assert ([s.run_id for s in top.states], top.total) == (["top"], 1), (
            "a subagent's run is not top-level"
        )
        every = await store.list_paused(PausedQuery(agents=("a",)))
        assert ([s.run_id for s in every.states], every.total) == (["top", "child"], 2)
        assert await store.list_running_runs("a") == ["busy"]
        # The counters count from what was there: the next write moves them.
        await store.save_run(
            runs[0].model_copy(update={"status": "running", "calls": []}), expected_version=4
        )
        assert (await store.list_paused(PausedQuery(agents=("a",), top_level=True))).total == 0
        assert (await store.list_paused(PausedQuery())).total == 1
    finally:
        await store.close()
    with closing(sqlite3.connect(db)) as after:
        assert after.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        names = {row[0] for row in after.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert not names & {"runs_by_agent", "runs_by_thread", "runs_by_resource", "runs_by_pause"}
        assert {"paused_by_resource", "running_by_agent", "expiring_by_agent"} <= names


async def test_a_file_of_version_2_gets_the_triggers_that_take_a_runs_roles_out(tmp_path: Path):
    # Version 2's triggers left a run's roles to its writes, each of which deleted them first; since
    # version 3 the triggers take them out, and only a listed run's write adds any.
    db = tmp_path / "v2.db"
    governed = paused("r1", 1)
    governed.calls[0].pauses[0].roles = ["ops"]
    store = SqliteStore(db)
    try:
        await store.create_run(governed)
    finally:
        await store.close()
    with closing(sqlite3.connect(db)) as raw:  # the file as version 2 left it
        for name, sql in raw.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall():
            raw.execute(f"DROP TRIGGER {name}")
            raw.execute(sql.replace("DELETE FROM paused_roles WHERE run_id = old.run_id;", ""))
        raw.execute("PRAGMA user_version = 2")
        raw.commit()

    store = SqliteStore(db)
    by_role = PausedQuery(agents=("a",), top_level=True, role="ops")
    try:
        assert (await store.list_paused(by_role)).total == 1
        await store.save_run(governed.model_copy(update={"status": "running"}), expected_version=1)
        assert (await store.list_paused(by_role)).total == 0
        await store.save_run(governed, expected_version=2)  # paused again: listed under its role again
        assert (await store.list_paused(by_role)).total == 1
        await store.delete_run("r1")
        assert (await store.list_paused(by_role)).total == 0
    finally:
        await store.close()
    with closing(sqlite3.connect(db)) as after:
        assert after.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert after.execute("SELECT COUNT(*) FROM paused_roles").fetchone()[0] == 0



async def test_a_file_a_newer_troupe_wrote_is_refused_before_anything_is_written_to_it(tmp_path: Path):
    """A file of a later schema version was opened as if it were this one's: this Troupe's writes would
    not keep what the newer one keeps (its triggers, counters), and the newer one would read it wrong."""
    from troupe.errors import StorageError

    db = tmp_path / "newer.db"
    store = SqliteStore(db)
    try:
        await store.create_run(paused("r1", 1))
    finally:
        await store.close()
    with closing(sqlite3.connect(db)) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        raw.commit()
        before = raw.execute("SELECT body, version FROM runs").fetchall()

    store = SqliteStore(db)
    try:
        newer = f"schema version {SCHEMA_VERSION + 1}, written by a newer Troupe"
        with pytest.raises(StorageError, match=newer):
            await store.create_run(paused("r2", 2))
        with pytest.raises(StorageError, match="newer Troupe"):
            await store.load_run("r1")
    finally:
        await store.close()
    with closing(sqlite3.connect(db)) as after:
        assert after.execute("SELECT body, version FROM runs").fetchall() == before
        assert after.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1

async def test_a_decision_past_the_hosts_cache_is_one_read_and_writes_what_it_writes_at_any_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """With 40 or 400 runs waiting, none of them kept by the host (they were written straight to the
    store), an approval parses its run once (one read by id, no listing) and its three commits (claim,
    checkpoint after the tool, end) write as many pages to the log: the listings' indexes are partial,
    so its checkpoints touch none of them, and its claim takes it out of three (counted from SQLite's
    write-ahead log, not timed)."""
    parsed = 0
    parse = RunState.from_json.__func__  # type: ignore[attr-defined]

    def counted(cls: type[RunState], raw: object) -> RunState:
        nonlocal parsed
        parsed += 1
        return parse(cls, raw)  # type: ignore[no-any-return]

    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_PAGES", 10**9)  # the log keeps every page
    monkeypatch.setattr(sqlite_store, "BACKSTOP_PAGES", 10**6)
    found = {}
    for runs in (40, 400):
        db = tmp_path / f"{runs}.db"
        runtime = Runtime([deleting_agent()], storage=SqliteStore(db), executor="local")
        try:
            agent = runtime.get_agent("ops")
            template = await agent.generate("delete it", resource_id="u1")
            stored = await runtime.store().load_run(template.run_id)
            assert stored is not None
            for first in range(0, runs, 100):
                await asyncio.gather(
                    *(runtime.store().create_run(copy(stored.state, i)) for i in range(first, first + 100))
                )
            with closing(sqlite3.connect(db)) as other:  # the log starts again: count from nothing
                other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            monkeypatch.setattr(RunState, "from_json", classmethod(counted))
            pages, parsed = wal_pages(db), 0
            done = await agent.approve_tool_call_generate(run_id="copy-00007")
            found[runs] = (parsed, wal_pages(db) - pages)
            monkeypatch.setattr(RunState, "from_json", classmethod(parse))
            assert done.text == "Deleted."
        finally:
            await runtime.shutdown()
    assert found[40][0] == found[400][0] == 1, found
    assert found[400][1] <= found[40][1] * 1.2, found


def deleting_agent() -> Agent:
    def turn(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return (
            text("Deleted.") if messages[-1]["role"] == "tool" else tool_call("delete", {"id": "x"}, id="c1")
        )

    tool = create_tool(
        "delete", "Delete", RecordInput, lambda inp, ctx: {"deleted": inp.id}, require_approval=True
    )
    return Agent("ops", model=FunctionModel(turn), tools=[tool])


def copy(state: RunState, i: int) -> RunState:
    again = state.model_copy(deep=True)
    again.run_id = f"copy-{i:05d}"
    again.calls[0].pauses[0].paused_at = T0 + timedelta(seconds=i)
    return again


def wal_pages(db: Path) -> int:
    """The pages written to the database's write-ahead log since it last started over."""
    data = Path(f"{db}-wal").read_bytes()
    if len(data) < 32:
        return 0
    size, salts = int.from_bytes(data[8:12], "big"), data[16:24]
    return sum(
        1
        for offset in range(32, len(data) - 24 - size + 1, 24 + size)
        if data[offset + 8 : offset + 16] == salts
    )
