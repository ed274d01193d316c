"""SqliteStore's durability is the caller's choice: synchronous=NORMAL (the default) or FULL, in every
process that opens the store (a Ray actor gets the store pickled)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from troupe import SqliteStore

# What PRAGMA synchronous reads back for each mode.
PRAGMA = {"NORMAL": 1, "FULL": 2}


@pytest.mark.parametrize("mode", ["NORMAL", "FULL"])
def test_each_connection_runs_at_the_chosen_synchronous_mode_even_after_pickling(tmp_path: Path, mode: str):
    store = pickle.loads(pickle.dumps(SqliteStore(tmp_path / "s.db", synchronous=mode)))  # type: ignore[arg-type]
    for busy_timeout_ms in (0, 30_000):  # the loop's connection and the worker thread's
        conn = store._open(busy_timeout_ms)
        try:
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == PRAGMA[mode]
        finally:
            conn.close()


def test_the_default_is_normal(tmp_path: Path):
    assert SqliteStore(tmp_path / "s.db").synchronous == "NORMAL"


@pytest.mark.parametrize("mode", ["OFF", "full", "", None])
def test_an_unknown_mode_is_refused_by_name(tmp_path: Path, mode: Any):
    with pytest.raises(ValueError, match="synchronous must be one of NORMAL, FULL"):
        SqliteStore(tmp_path / "s.db", synchronous=mode)
