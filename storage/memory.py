"""MemoryStore: the reference backend, in one process's memory (tests, notebooks, quick use).

State is kept as JSON text, exactly as the durable backends keep it, so nothing a caller holds aliases
what is stored and every round trip exercises the same (de)serialisation.
"""

from __future__ import annotations

import heapq
import time
import uuid
from collections import defaultdict
from typing import Any

from troupe.core.vocabulary.errors import DuplicateRunError
from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.store import (
    AuditEntry,
    LinkRecord,
    OutboxEntry,
    StaleSnapshotError,
    StoredRun,
    SuspendedRunQuery,
    ThreadAppend,
    expiry_timestamp,
    pause_timestamp,
)


class MemoryStore:
    # Under Ray a MemoryStore cannot be copied into each actor: the Runtime stands in a private SQLite file.
    shared_across_processes = False

    def __init__(self) -> None:
        self.identity = f"memory:{uuid.uuid4().hex[:12]}"
        self._runs: dict[str, tuple[str, int, str]] = {}  # run id -> (state JSON, version, agent id)
        self._finished: set[str] = set()
        # Indexes: suspended and running run ids per agent, and when each suspended run's first pause
        # expires (only runs with a deadline), so the reconciler's sweep never parses a stored run.
        self._suspended: dict[str, set[str]] = defaultdict(set)
        self._running: dict[str, set[str]] = defaultdict(set)
        self._expiring: dict[str, dict[str, float]] = defaultdict(dict)
        self._audit: dict[str, list[str]] = defaultdict(list)
        self._threads: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._thread_resources: dict[str, str] = {}
        self._owners: dict[str, float] = {}
        self._outbox: dict[str, str] = {}  # delivery id -> OutboxEntry JSON, in the order written
        # Indexes, so that a claim parses only the deliveries it takes and a run's listing only its own
        # (delivered ones stay until pruned): each delivery's place in the write order, when each pending one
        # is due, and each run's deliveries.
        self._written: dict[str, int] = {}
        self._writes = 0  # not len(_written): pruned entries leave it
        self._pending: dict[str, tuple[float, int]] = {}
        self._deliveries_of: dict[str, list[str]] = defaultdict(list)
        # Delivered entries: when each may be pruned (its delivery; later while its run lives), and the
        # same as a heap, whose stale items (redelivered, or pushed back since) are skipped when popped.
        self._prune_at: dict[str, float] = {}
        self._prunable: list[tuple[float, int, str]] = []
        self._links: dict[str, str] = {}  # decision link id -> LinkRecord JSON
        self._links_to_forget: list[tuple[float, str]] = []  # (forget at, id), a heap

    def __reduce__(self) -> Any:
        raise TypeError(
            "a MemoryStore lives in one process and cannot be pickled; under Ray the Runtime "
            "keeps its state in a private SQLite file instead"
        )

    async def create_run(self, state: RunState) -> int:
        return await self.save_run(state, expected_version=0)

    async def load_run(self, run_id: str) -> StoredRun | None:
        entry = self._runs.get(run_id)
        if entry is None:
            return None
        return StoredRun(RunState.from_json(entry[0]), entry[1])

    async def save_run(
        self,
        state: RunState,
        *,
        expected_version: int,
        audit: tuple[AuditEntry, ...] = (),
        thread: ThreadAppend | None = None,
        outbox: tuple[OutboxEntry, ...] = (),
    ) -> int:
        entry = self._runs.get(state.run_id)
        if expected_version == 0 and (entry is not None or state.run_id in self._finished):
            raise DuplicateRunError(f"run {state.run_id} already exists", run_id=state.run_id)
        if expected_version != (0 if entry is None else entry[1]):
            raise StaleSnapshotError(
                f"run {state.run_id} is not at version {expected_version}", run_id=state.run_id
            )
        version = expected_version + 1
        self._put(state, version)
        for item in audit:
            self._audit[item.run_id].append(item.model_dump_json())
        self._append(thread)
        for delivery in outbox:
            if delivery.id not in self._outbox:  # an id already there is kept as it is
                self._keep(delivery)
        return version

    def _append(self, thread: ThreadAppend | None) -> None:
        if thread is not None:
            self._thread_resources.setdefault(thread.thread_id, thread.resource_id or "")
            self._threads[thread.thread_id].extend(dict(m) for m in thread.messages)

    def _put(self, state: RunState, version: int) -> None:
        self._unindex(state.run_id, state.agent_id)
        self._runs[state.run_id] = (state.to_json(), version, state.agent_id)
        if state.status == "suspended":
            self._suspended[state.agent_id].add(state.run_id)
            at = expiry_timestamp(state)
            if at is not None:
                self._expiring[state.agent_id][state.run_id] = at
        elif state.status == "running":
            self._running[state.agent_id].add(state.run_id)

    def _unindex(self, run_id: str, agent_id: str) -> None:
        self._suspended[agent_id].discard(run_id)
        self._running[agent_id].discard(run_id)
        self._expiring[agent_id].pop(run_id, None)

    async def delete_run(
        self, run_id: str, *, expected_version: int | None = None, thread: ThreadAppend | None = None
    ) -> None:
        entry = self._runs.get(run_id)
        if entry is None:
            return  # already gone, and with it whatever its deletion appended
        if expected_version is not None and entry[1] != expected_version:
            raise StaleSnapshotError(f"run {run_id} is not at version {expected_version}", run_id=run_id)
        del self._runs[run_id]
        self._finished.add(run_id)  # a run id is never used again
        self._unindex(run_id, entry[2])
        self._append(thread)

    async def list_suspended_runs(self, query: SuspendedRunQuery) -> tuple[list[RunState], int]:
        agents = [query.agent_id] if query.agent_id is not None else list(self._suspended)
        ids = [run_id for agent in agents for run_id in self._suspended[agent]]
        states = [RunState.from_json(self._runs[run_id][0]) for run_id in ids]
        matched = sorted(
            (s for s in states if query.matches(s)), key=lambda s: pause_timestamp(s) or 0.0, reverse=True
        )
        end = None if query.limit is None else query.offset + query.limit
        return matched[query.offset : end], len(matched)

    async def list_running_runs(self, agent_id: str) -> list[str]:
        return sorted(self._running[agent_id])

    async def list_expiring_runs(self, agent_id: str, before: float) -> list[str]:
        due = sorted((at, run_id) for run_id, at in self._expiring[agent_id].items() if at <= before)
        return [run_id for _, run_id in due]

    async def append_audit(self, entry: AuditEntry) -> None:
        self._audit[entry.run_id].append(entry.model_dump_json())

    async def list_audit(self, run_id: str) -> list[AuditEntry]:
        return [AuditEntry.model_validate_json(raw) for raw in self._audit.get(run_id, [])]

    # ---- outbox -------------------------------------------------------------------------------------

    def _keep(self, delivery: OutboxEntry) -> None:
        """Write ``delivery``, and its place in the indexes."""
        if delivery.id not in self._written:
            self._written[delivery.id] = self._writes = self._writes + 1
            self._deliveries_of[delivery.run_id].append(delivery.id)
        self._outbox[delivery.id] = delivery.model_dump_json()
        if delivery.status == "pending":
            self._pending[delivery.id] = (delivery.due_at(), self._written[delivery.id])
        else:
            self._pending.pop(delivery.id, None)
        if delivery.status == "delivered" and delivery.delivered_at is not None:
            self._prune_later(delivery.id, delivery.delivered_at)
        else:
            self._prune_at.pop(delivery.id, None)

    def _prune_later(self, delivery_id: str, at: float) -> None:
        self._prune_at[delivery_id] = at
        heapq.heappush(self._prunable, (at, self._written[delivery_id], delivery_id))

    async def claim_deliveries(
        self, owner: str, now: float, lease_s: float, limit: int, *, target: str | None = None
    ) -> list[OutboxEntry]:
        # The earliest due first, ties in the order written.
        due = sorted((when, delivery_id) for delivery_id, when in self._pending.items() if when[0] <= now)
        entries = (OutboxEntry.model_validate_json(self._outbox[delivery_id]) for _, delivery_id in due)
        claimed = [
            entry.leased(owner, now + lease_s)
            for entry in entries
            if target is None or entry.target == target
        ][:limit]
        for delivery in claimed:
            self._keep(delivery)
        return claimed

    async def settle_delivery(self, entry: OutboxEntry) -> bool:
        raw = self._outbox.get(entry.id)
        if raw is None or OutboxEntry.model_validate_json(raw).lease_owner != entry.lease_owner:
            return False
        self._keep(entry.released())
        return True

    async def list_deliveries(self, run_id: str) -> list[OutboxEntry]:
        return [OutboxEntry.model_validate_json(self._outbox[i]) for i in self._deliveries_of.get(run_id, [])]

    async def redeliver(self, delivery_id: str, now: float) -> OutboxEntry | None:
        raw = self._outbox.get(delivery_id)
        if raw is None:
            return None
        again = OutboxEntry.model_validate_json(raw).requeued(now)
        self._keep(again)
        return again

    async def prune_deliveries(self, now: float, keep_s: float, limit: int) -> int:
        pruned, alive = 0, []
        while self._prunable and self._prunable[0][0] <= now - keep_s and pruned < limit:
            at, _, delivery_id = heapq.heappop(self._prunable)
            if self._prune_at.get(delivery_id) != at:
                continue  # redelivered, or pushed back, since
            run_id = OutboxEntry.model_validate_json(self._outbox[delivery_id]).run_id
            if run_id in self._runs:
                alive.append(delivery_id)  # pushed back after the loop, so this call looks at it once
                continue
            del self._outbox[delivery_id], self._written[delivery_id], self._prune_at[delivery_id]
            self._deliveries_of[run_id].remove(delivery_id)
            if not self._deliveries_of[run_id]:
                del self._deliveries_of[run_id]
            pruned += 1
        for delivery_id in alive:
            self._prune_later(delivery_id, now)
        return pruned

    async def touch_owner(self, owner: str, ttl_s: float) -> None:
        self._owners[owner] = time.time() + ttl_s

    async def live_owners(self) -> set[str]:
        now = time.time()
        return {owner for owner, until in self._owners.items() if until > now}

    async def append_messages(
        self, thread_id: str, resource_id: str | None, messages: list[dict[str, Any]]
    ) -> None:
        self._append(ThreadAppend(thread_id, resource_id, messages))

    async def load_messages(self, thread_id: str) -> list[dict[str, Any]]:
        return [dict(m) for m in self._threads.get(thread_id, [])]

    async def thread_resource(self, thread_id: str) -> str | None:
        return self._thread_resources.get(thread_id)

    # ---- decision links -----------------------------------------------------------------------------

    async def issue_link(self, record: LinkRecord) -> LinkRecord:
        self._forget_links(time.time())
        if record.id not in self._links:
            self._links[record.id] = record.model_dump_json()
            heapq.heappush(self._links_to_forget, (record.forget_at(), record.id))
        return LinkRecord.model_validate_json(self._links[record.id])

    def _forget_links(self, now: float) -> None:
        while self._links_to_forget and self._links_to_forget[0][0] <= now:
            _, link_id = heapq.heappop(self._links_to_forget)
            self._links.pop(link_id, None)

    async def load_link(self, link_id: str) -> LinkRecord | None:
        raw = self._links.get(link_id)
        return None if raw is None else LinkRecord.model_validate_json(raw)

    async def use_link(self, link_id: str, who: str, now: float) -> LinkRecord | None:
        record = await self.load_link(link_id)
        if record is None or not record.usable_by(who, now):
            return None
        record.used_by.append(who)
        self._links[link_id] = record.model_dump_json()
        return record

    async def release_link(self, link_id: str, who: str) -> None:
        record = await self.load_link(link_id)
        if record is not None and who in record.used_by:
            record.used_by.remove(who)
            self._links[link_id] = record.model_dump_json()

    async def close(self) -> None:
        return None


__all__ = ["MemoryStore"]
