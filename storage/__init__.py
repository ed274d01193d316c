"""Durable state behind the one ``Store`` protocol (defined in ``troupe.core.store``)."""

from troupe.core.store import AuditEntry, StaleSnapshotError, Store, StoredRun, SuspendedRunQuery
from troupe.storage.memory import MemoryStore
from troupe.storage.redis import RedisStore
from troupe.storage.sqlite import SqliteStore

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
