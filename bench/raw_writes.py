"""The raw durable write: the least a store can do to make a run's state durable, the floor a W1 cycle's
writes are held to (issue 42: "writes x the raw durable write, plus the actor calls").

- Redis: one ``SET`` of the state's JSON under a key of its own, on the same redis-server (so the same
  ``appendfsync``), over the same kind of connection the store uses for a plain URL (its own pipelined
  connection, ``troupe.storage.redis_wire``): no script, no index, no compare-and-set.
- SQLite: one autocommit ``INSERT OR REPLACE`` of the state's JSON into a one-table database beside the
  store's file (the same disk), in WAL mode with the same ``synchronous``: one commit, one fsync with
  ``FULL``, no index, no compare-and-set. It runs where SqliteStore's commits run, on the event loop's
  thread.

Each function times one write at a time and returns every sample (ms); the caller interleaves them
with the store's own writes, so that both see the same moments of a shared machine.
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from pathlib import Path
from typing import Any

from troupe.storage.redis_wire import WireClient, address_of


class RawRedis:
    """``SET`` on the redis-server at ``url`` (a plain ``redis://`` URL)."""

    def __init__(self, url: str) -> None:
        address = address_of(url)
        if address is None:
            raise ValueError("the raw write needs a plain redis:// URL")
        self.client = WireClient(address, timeout=5.0)
        self._keys = itertools.count()

    async def write_ms(self, body: str) -> float:
        key = f"bench-raw:{next(self._keys) % 100}"
        started = time.perf_counter()
        await self.client.execute("SET", key, body)
        return (time.perf_counter() - started) * 1000

    async def close(self) -> None:
        await self.client.aclose()


class RawSqlite:
    """An autocommit ``INSERT OR REPLACE`` in a database beside ``store_path`` with ``synchronous``."""

    def __init__(self, store_path: Path, synchronous: str) -> None:
        self.path = store_path.with_name(store_path.name + "-raw.db")
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={'FULL' if synchronous.upper() == 'FULL' else 'NORMAL'}")
        self.conn.execute("CREATE TABLE IF NOT EXISTS raw (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        self._keys = itertools.count()

    async def write_ms(self, body: str) -> float:
        key = next(self._keys) % 100
        started = time.perf_counter()
        self.conn.execute("INSERT OR REPLACE INTO raw (k, v) VALUES (?, ?)", (key, body))
        return (time.perf_counter() - started) * 1000

    async def close(self) -> None:
        self.conn.close()


def raw_writer(kind: str, **where: Any) -> RawRedis | RawSqlite:
    """The raw write of a store of ``kind`` ("redis": ``url``; "sqlite": ``store_path``, ``synchronous``)."""
    if kind == "redis":
        return RawRedis(where["url"])
    return RawSqlite(where["store_path"], where["synchronous"])


__all__ = ["RawRedis", "RawSqlite", "raw_writer"]
