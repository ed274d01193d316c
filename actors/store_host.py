"""A single-process store (MemoryStore, in-memory SQLite) shared by every actor of a Ray runtime.

Copying such a store into each actor would give each its own private state; instead one store actor
holds it and ``RemoteStore`` forwards the ``Store`` protocol to it.
"""

from __future__ import annotations

from typing import Any

from troupe.actors.remote import RayActor
from troupe.core.state import RunState
from troupe.core.store import AuditEntry, OutboxEntry, Store, StoredRun, SuspendedRunQuery, ThreadAppend


class StoreHost:
    """Actor body: owns the store. ``factory`` builds it inside the actor's process."""

    def __init__(self, factory: Any) -> None:
        self.store: Store = factory()

    async def invoke(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return await getattr(self.store, method)(*args, **kwargs)


class RemoteStore:
    shared_across_processes = True

    def __init__(self, actor: RayActor, identity: str) -> None:
        self.actor = actor
        self.identity = identity

    def __reduce__(self) -> Any:
        return (RemoteStore, (self.actor, self.identity))

    async def _invoke(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await self.actor.call("invoke", method, args, kwargs)

    async def create_run(self, state: RunState) -> int:
        version: int = await self._invoke("create_run", state)
        return version

    async def load_run(self, run_id: str) -> StoredRun | None:
        stored: StoredRun | None = await self._invoke("load_run", run_id)
        return stored

    async def save_run(
        self,
        state: RunState,
        *,
        expected_version: int,
        audit: tuple[AuditEntry, ...] = (),
        thread: ThreadAppend | None = None,
        outbox: tuple[OutboxEntry, ...] = (),
    ) -> int:
        version: int = await self._invoke(
            "save_run", state, expected_version=expected_version, audit=audit, thread=thread, outbox=outbox
        )
        return version

    async def delete_run(
        self, run_id: str, *, expected_version: int | None = None, thread: ThreadAppend | None = None
    ) -> None:
        await self._invoke("delete_run", run_id, expected_version=expected_version, thread=thread)

    async def list_suspended_runs(self, query: SuspendedRunQuery) -> tuple[list[RunState], int]:
        found: tuple[list[RunState], int] = await self._invoke("list_suspended_runs", query)
        return found

    async def list_running_runs(self, agent_id: str) -> list[str]:
        found: list[str] = await self._invoke("list_running_runs", agent_id)
        return found

    async def list_expiring_runs(self, agent_id: str, before: float) -> list[str]:
        found: list[str] = await self._invoke("list_expiring_runs", agent_id, before)
        return found

    async def list_audit(self, run_id: str) -> list[AuditEntry]:
        found: list[AuditEntry] = await self._invoke("list_audit", run_id)
        return found

    async def claim_deliveries(self, owner: str, now: float, lease_s: float, limit: int) -> list[OutboxEntry]:
        found: list[OutboxEntry] = await self._invoke("claim_deliveries", owner, now, lease_s, limit)
        return found

    async def settle_delivery(self, entry: OutboxEntry) -> bool:
        return bool(await self._invoke("settle_delivery", entry))

    async def list_deliveries(self, run_id: str) -> list[OutboxEntry]:
        found: list[OutboxEntry] = await self._invoke("list_deliveries", run_id)
        return found

    async def redeliver(self, delivery_id: str, now: float) -> OutboxEntry | None:
        found: OutboxEntry | None = await self._invoke("redeliver", delivery_id, now)
        return found

    async def touch_owner(self, owner: str, ttl_s: float) -> None:
        await self._invoke("touch_owner", owner, ttl_s)

    async def live_owners(self) -> set[str]:
        found: set[str] = await self._invoke("live_owners")
        return found

    async def append_messages(
        self, thread_id: str, resource_id: str | None, messages: list[dict[str, Any]]
    ) -> None:
        await self._invoke("append_messages", thread_id, resource_id, messages)

    async def thread_resource(self, thread_id: str) -> str | None:
        found: str | None = await self._invoke("thread_resource", thread_id)
        return found

    async def load_messages(self, thread_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = await self._invoke("load_messages", thread_id)
        return found

    async def close(self) -> None:
        self.actor.kill()


__all__ = ["RemoteStore", "StoreHost"]
