"""Durable state behind the one ``Store`` protocol (defined in ``troupe.core.vocabulary.store``)."""

from troupe.core.vocabulary.store import AuditEntry, StaleSnapshotError, Store, StoredRun, SuspendedRunQuery
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
