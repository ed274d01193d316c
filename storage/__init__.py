"""Durable state behind the one ``Store`` protocol (defined in ``core.store``)."""

from core.store import AuditEntry, StaleSnapshotError, Store, StoredRun, SuspendedRunQuery
from storage.memory import MemoryStore
from storage.redis import RedisStore
from storage.sqlite import SqliteStore

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
