"""Durable state behind the one ``Store`` protocol (defined in ``troupe.core.vocabulary.store``)."""

from typing import TYPE_CHECKING, Any

from troupe.core.vocabulary.store import AuditEntry, StaleSnapshotError, Store, StoredRun, SuspendedRunQuery
from troupe.storage.memory import MemoryStore
from troupe.storage.sqlite import SqliteStore

if TYPE_CHECKING:
    from troupe.storage.redis import RedisStore


def __getattr__(name: str) -> Any:
    """``RedisStore`` loads redis-py on first use (PEP 562): a process that uses another store, such as
    every agent's actor unpickling a SqliteStore (which imports this package), is spared its 6 MiB."""
    if name == "RedisStore":
        from troupe.storage.redis import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AuditEntry",
    "MemoryStore",
    "RedisStore",
    "SqliteStore",
    "StaleSnapshotError",
    "Store",
    "StoredRun",
    "SuspendedRunQuery",
]
