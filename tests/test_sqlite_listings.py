"""SqliteStore's listings kept by SQLite itself: a file from before them is brought up to date once, and
what a listing reads is one seek into an index whatever the file holds (counted by SQLite's own virtual
machine steps, not timed)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from troupe.core.vocabulary.listing import PausedQuery
from troupe.core.vocabulary.state import CallStatus, ParentLink, Pause, RunState, ToolCallState
from troupe.storage.sqlite_listing import SCHEMA_VERSION

from troupe import SqliteStore

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
        assert {"paused_top_by_resource", "running_by_agent", "expiring_by_agent"} <= names
